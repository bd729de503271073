"""Prototype of a proposed fix: the real hub with a raw ``tools/call`` fast path in front-server middleware.

``python bench/_hub_raw_relay.py CONFIG HOME``. For handshake-era clients, a middleware resolves the exposed name
with the hub's registry and supervisor, sends the client's raw params to the downstream with the SDK dispatcher's
``send_raw_request`` and returns the downstream's raw result dict, short-circuiting the chain. That skips, per call:
the front's params validation and typed-params model, the downstream ``CallToolResult`` validation and the
output-schema check in the hub's ``Client``, and the front's ``model_dump`` + surface validation + dump of the
result (the end client validates the result itself). Stateless-era requests take the normal path. The downstream
connection must be handshake-era (``"protocol": "legacy"``) because raw params carry no 2026 ``_meta`` stamp.

It leans on private SDK API (``session._dispatcher``) and skips the hub's relay bookkeeping, so it only measures
what the shortcut is worth; see ``proxy_overhead``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from hanzo_hub.config import load_settings
from hanzo_hub.hub.core import Hub
from hanzo_hub.transports import stdio as stdio_transport


def raw_tools_call(hub: Hub) -> Any:
    """The middleware: ``tools/call`` from a handshake-era client goes straight through."""

    async def middleware(ctx: Any, call_next: Any) -> Any:
        if ctx.method != "tools/call" or ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS or not ctx.params:
            return await call_next(ctx)
        target = hub.registry.resolve_tool(ctx.params["name"])
        supervisor = hub.pool.get(target.server)
        params = {**ctx.params, "name": target.original}
        async with supervisor.use() as client:
            with anyio.fail_after(supervisor.call_timeout):
                return await client.session._dispatcher.send_raw_request("tools/call", params)

    return middleware


async def serve(config: Path, home: Path) -> None:
    """``hanzo_hub serve`` over stdio exactly as shipped, except that the front server gets the middleware."""
    settings = load_settings(config, home=home, log_level="WARNING")
    shipped = stdio_transport.build_server

    def build_with_fast_path(hub: Hub) -> Any:
        server = shipped(hub)
        server.middleware.append(raw_tools_call(hub))
        return server

    stdio_transport.build_server = build_with_fast_path  # type: ignore[assignment]
    await stdio_transport.serve_stdio(settings)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    anyio.run(serve, Path(sys.argv[1]), Path(sys.argv[2]))
