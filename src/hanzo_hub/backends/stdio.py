"""Downstream servers launched as subprocesses, on pipes the hub owns (``hanzo_hub.backends.pipes``).

With a ``ConnectContext.sandbox`` the command goes through the sandbox's launch plan (bubblewrap, docker or an
explicit ``none``), and the plan's resources (a cgroup) are released once the process has exited. ``${vault:NAME}``
references in env values are filled from the vault here, at launch, and nowhere else. Off asyncio (the pipes are
asyncio's) the SDK's ``stdio_client`` does the process handling instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from mcp import StdioServerParameters, stdio_client
from mcp.client._transport import TransportStreams

from hanzo_hub.backends.base import ConnectContext
from hanzo_hub.backends.pipes import Launch, PipeTransport
from hanzo_hub.backends.snapshot import file_key
from hanzo_hub.config import StdioServerSpec
from hanzo_hub.sandbox.vault import expand_secrets


def connect(spec: StdioServerSpec, context: ConnectContext) -> AbstractAsyncContextManager[Any]:
    """A transport that spawns the server; its stderr is appended to ``<log_dir>/<server>.log``.

    On asyncio the hub writes that log itself (``hanzo_hub.line_log``): with secrets in the vault every
    line has them replaced by ``[redacted:NAME]``, and the file is rotated at ``context.log_max_bytes``. Off asyncio
    (never in the hub itself) the SDK's transport appends stderr to the file as it comes.
    """
    if _on_asyncio():
        log = context.log_dir / f"{file_key(context.server)}.log"
        return PipeTransport(
            lambda: _launch(spec, context),
            log,
            context.redact,
            log_max_bytes=context.log_max_bytes,
            log_backups=context.log_backups,
            max_message_bytes=context.max_message_bytes,
            name=context.server,
        )
    return _sdk_spawn(spec, context)


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _env(spec: StdioServerSpec, context: ConnectContext) -> dict[str, str]:
    """The spec's env with secrets filled in (raises ``VaultError`` for a secret the vault lacks)."""
    return {key: expand_secrets(value, context.secrets) for key, value in spec.env.items()}


@asynccontextmanager
async def _launch(spec: StdioServerSpec, context: ConnectContext) -> AsyncIterator[Launch]:
    """The command line of one start: the spec's own, or its sandbox plan's (released after the process ended)."""
    cwd = str(spec.cwd) if spec.cwd is not None else None
    if context.sandbox is None:
        yield Launch(spec.command, list(spec.args), _env(spec, context) or None, cwd)
        return
    plan = await context.sandbox.plan([spec.command, *spec.args], _env(spec, context), cwd)
    try:
        yield Launch(plan.command, list(plan.args), plan.env or None, plan.cwd)
    finally:
        with anyio.CancelScope(shield=True):
            await plan.aclose()


@asynccontextmanager
async def _sdk_spawn(spec: StdioServerSpec, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    async with _launch(spec, context) as launch:
        params = StdioServerParameters(command=launch.command, args=launch.args, env=launch.env, cwd=launch.cwd)
        context.log_dir.mkdir(parents=True, exist_ok=True)
        with (context.log_dir / f"{file_key(context.server)}.log").open("a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as streams:
                yield streams
