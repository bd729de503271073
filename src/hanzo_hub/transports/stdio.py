"""Serving the hub over stdin/stdout. Logs go to stderr, never stdout."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server, initialization_options


async def serve_stdio(settings: HubSettings) -> None:
    """Serve until the client closes stdin; every downstream server is stopped before this returns."""
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        async with stdio_server() as (read, write):
            await server.run(read, write, initialization_options(server))
