"""Downstream servers launched as subprocesses (the SDK's ``stdio_client`` does the process handling).

With a ``ConnectContext.sandbox`` the command goes through the sandbox's launch plan (bubblewrap, docker or an
explicit ``none``), and the plan's resources (a cgroup) are released once the process has exited. ``${vault:NAME}``
references in env values are filled from the vault here, at launch, and nowhere else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from mcp import StdioServerParameters, stdio_client
from mcp.client._transport import TransportStreams

from hanzo_hub.backends.base import ConnectContext
from hanzo_hub.backends.snapshot import file_key
from hanzo_hub.config import StdioServerSpec
from hanzo_hub.sandbox.vault import expand_secrets


def connect(spec: StdioServerSpec, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    """A transport that spawns the server; its stderr is appended to ``<log_dir>/<server>.log``."""
    if context.sandbox is not None:
        return _spawn_sandboxed(spec, context)  # type: ignore[return-value]
    env = _env(spec, context)
    params = StdioServerParameters(command=spec.command, args=list(spec.args), env=env or None, cwd=spec.cwd)
    return _spawn(params, context)  # type: ignore[return-value]


def _env(spec: StdioServerSpec, context: ConnectContext) -> dict[str, str]:
    """The spec's env with secrets filled in (raises ``VaultError`` for a secret the vault lacks)."""
    return {key: expand_secrets(value, context.secrets) for key, value in spec.env.items()}


@asynccontextmanager
async def _spawn_sandboxed(spec: StdioServerSpec, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    cwd = str(spec.cwd) if spec.cwd is not None else None
    plan = await context.sandbox.plan([spec.command, *spec.args], _env(spec, context), cwd)
    try:
        params = StdioServerParameters(command=plan.command, args=plan.args, env=plan.env or None, cwd=plan.cwd)
        async with _spawn(params, context) as streams:
            yield streams
    finally:
        with anyio.CancelScope(shield=True):
            await plan.aclose()


@asynccontextmanager
async def _spawn(params: StdioServerParameters, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    context.log_dir.mkdir(parents=True, exist_ok=True)
    with (context.log_dir / f"{file_key(context.server)}.log").open("a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
