"""The smallest proxy the SDK allows: a low-level ``Server`` over stdio forwarding to one ``Client`` (a reference).

``python bench/_min_proxy.py CMD [ARGS...]`` spawns ``CMD ARGS`` as its downstream (mode ``auto``) and forwards
``tools/list`` and ``tools/call`` unchanged: no registry, no supervision, no renaming. It shows what any proxy built
on the SDK pays per hop, so the hub's own overhead can be told apart from the SDK's.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server


async def main(command: str, args: list[str]) -> None:
    params = StdioServerParameters(command=command, args=args, cwd=".")
    async with Client(params, mode="auto", cache=None) as client:
        await client.list_tools()  # fills the client's output-schema cache, as the hub's discovery does

        async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            return await client.list_tools()

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await client.call_tool(params.name, params.arguments)

        @asynccontextmanager
        async def lifespan(server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            yield {}

        server: Server[Any] = Server("min-proxy", on_list_tools=list_tools, on_call_tool=call_tool, lifespan=lifespan)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options(NotificationOptions()))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2:])
