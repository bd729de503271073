"""The front MCP server: a low-level SDK ``Server`` whose handlers call the hub.

This is the one place where hub errors become MCP: unknown names become protocol errors with the spec's codes,
downstream failures of ``tools/call`` become ``isError`` results (done by the hub), failures of other requests
become protocol errors that name the server, and no traceback ever reaches the wire.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions

from hanzo_hub import __version__
from hanzo_hub.errors import BackendError, HubError, PromptNotFound, ResourceNotFound, ToolNotFound
from hanzo_hub.hub.core import Hub

logger = logging.getLogger(__name__)

SERVER_NAME = "hanzo-hub"
RESOURCE_NOT_FOUND = -32002
"""The spec's code for an unknown resource."""

T = TypeVar("T")
Ctx = ServerRequestContext[Any, Any]


@asynccontextmanager
async def _translated() -> AsyncIterator[None]:
    try:
        yield
    except ToolNotFound as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    except PromptNotFound as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    except ResourceNotFound as exc:
        raise MCPError(RESOURCE_NOT_FOUND, str(exc)) from None
    except BackendError as exc:
        raise MCPError(types.INTERNAL_ERROR, str(exc)) from None
    except HubError as exc:
        raise MCPError(types.INTERNAL_ERROR, str(exc)) from None


def build_server(hub: Hub) -> Server[Any]:
    """The hub's front server. Its lifespan is empty: whoever serves it holds ``Hub.open`` around it."""

    def handler(fn: Callable[[Ctx, Any], Awaitable[T]]) -> Callable[[Ctx, Any], Awaitable[T]]:
        async def wrapped(ctx: Ctx, params: Any) -> T:
            hub.notifier.track(ctx.session, ctx.protocol_version)
            async with _translated():
                return await fn(ctx, params)

        return wrapped

    @handler
    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await hub.list_tools())

    @handler
    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)  # a no-op unless the client asked for it

        return await hub.call_tool(params.name, params.arguments, progress)

    @handler
    async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        context = params.context.arguments if params.context is not None else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        return await hub.complete(params.ref, argument, context)

    @handler
    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await hub.list_resources())

    @handler
    async def list_templates(
        ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=await hub.list_resource_templates())

    @handler
    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await hub.read_resource(str(params.uri))

    @handler
    async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=await hub.list_prompts())

    @handler
    async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await hub.get_prompt(params.name, params.arguments)

    return Server(
        SERVER_NAME,
        version=__version__,
        title="hanzo-hub",
        description="One MCP server in front of many MCP tool servers.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_subscriptions_listen=hub.notifier.listen_handler,
    )


def initialization_options(server: Server[Any]) -> InitializationOptions:
    """Options announcing that every list may change (the hub aggregates servers that come and go)."""
    return server.create_initialization_options(
        NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
    )
