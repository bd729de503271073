"""Downstream servers launched as subprocesses (the SDK's ``stdio_client`` does the process handling)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp import StdioServerParameters, stdio_client
from mcp.client._transport import TransportStreams

from hanzo_hub.backends.base import ConnectContext
from hanzo_hub.backends.snapshot import file_key
from hanzo_hub.config import StdioServerSpec


def connect(spec: StdioServerSpec, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    """A transport that spawns the server; its stderr is appended to ``<log_dir>/<server>.log``."""
    params = StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd)
    return _spawn(params, context)  # type: ignore[return-value]


@asynccontextmanager
async def _spawn(params: StdioServerParameters, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    context.log_dir.mkdir(parents=True, exist_ok=True)
    with (context.log_dir / f"{file_key(context.server)}.log").open("a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
