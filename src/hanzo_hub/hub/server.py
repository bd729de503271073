"""The front MCP server: a low-level SDK ``Server`` whose handlers call the hub.

This is the one place where hub errors become MCP: unknown names become protocol errors with the spec's codes,
downstream failures of ``tools/call`` become ``isError`` results (done by the hub), failures of other requests
become protocol errors that name the server, and no traceback ever reaches the wire.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import MCPDeprecationWarning, MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel

from hanzo_hub import __version__
from hanzo_hub.errors import BackendError, HubError, PromptNotFound, ResourceNotFound, ToolNotFound
from hanzo_hub.hub.connections import session_connection
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.fastcall import RawToolCalls
from hanzo_hub.hub.search import (
    CALL_TOOL,
    FIND_TOOLS,
    ClientView,
    ToolSearch,
    UnknownProfile,
    promote,
    promoted_of,
    selection_result,
    tool_describer,
)
from hanzo_hub.hub.status import STATUS_URI, status_resource, status_result, unavailable_tools, watch_status

logger = logging.getLogger(__name__)

SERVER_NAME = "hanzo-hub"

T = TypeVar("T")
UNSUBSCRIBE_TIMEOUT = 5.0
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
        raise MCPError(types.INVALID_PARAMS, str(exc), data={"uri": exc.uri}) from None
    except BackendError as exc:
        raise MCPError(types.INTERNAL_ERROR, str(exc)) from None
    except HubError as exc:
        raise MCPError(types.INTERNAL_ERROR, str(exc)) from None


def _unstamped(result: T) -> T:
    """Drop a downstream's ``serverInfo`` stamp from a proxied result: the hub answered (and stamps itself)."""
    meta = getattr(result, "meta", None)
    if not isinstance(result, BaseModel) or not meta or types.SERVER_INFO_META_KEY not in meta:
        return result
    rest = {key: value for key, value in meta.items() if key != types.SERVER_INFO_META_KEY}
    return result.model_copy(update={"meta": rest or None})


def _stateless(ctx: Ctx) -> bool:
    return ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS


class _Handlers:
    """Request handlers of the front server; each one tracks the client's session and translates errors."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.search = ToolSearch(
            hub.settings.exposure,
            completer_of=lambda: hub.llm.completer,  # the routing layer's gateway, once it runs
            home=hub.settings.home,
            describe=tool_describer(hub),
            embedding=hub.settings.embedding,
        )

    def _view(self, ctx: Ctx) -> ClientView:
        try:
            return self.search.view(ctx)
        except UnknownProfile as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from exc

    async def list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        view = self._view(ctx)
        tools = self.search.visible(await self.hub.list_tools(), view)
        if await self.search.listing(view, tools) == "all":
            return types.ListToolsResult(tools=tools)
        promoted = promoted_of(session_connection(ctx.session), _stateless(ctx), self.search.shared_promoted)
        return types.ListToolsResult(tools=self.search.listed(tuple(tools), promoted))

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)  # a no-op unless the client asked for it

        view = self._view(ctx)
        searching = params.name in (FIND_TOOLS, CALL_TOOL) and await self._searching(view, params.name)
        if searching and params.name == FIND_TOOLS:
            return await self._find_tools(ctx, params, view)
        if searching and params.name == CALL_TOOL:
            arguments = params.arguments or {}
            params = params.model_copy(
                update={"name": str(arguments.get("name", "")), "arguments": arguments.get("arguments") or {}}
            )
        if not self.search.allowed(view.profile)(params.name):
            refusal = f"tool {params.name!r} is not in profile {view.profile!r}"
            return types.CallToolResult(content=[types.TextContent(type="text", text=refusal)], is_error=True)
        return await self.hub.call_tool(params.name, params.arguments, progress, ctx=ctx, params=params)

    async def _searching(self, view: ClientView, name: str) -> bool:
        """Whether ``find_tools``/``call_tool`` (``name``) are the hub's for this client: always in search mode; in
        'auto' unless the client's list is every tool and a downstream tool of that name is in it."""
        if view.mode != "auto":
            return view.mode == "search"
        tools = self.search.visible(await self.hub.list_tools(), view)
        return await self.search.listing(view, tools) == "search" or all(tool.name != name for tool in tools)

    async def _find_tools(
        self, ctx: Ctx, params: types.CallToolRequestParams, view: ClientView
    ) -> types.CallToolResult:
        query = str((params.arguments or {}).get("query", "")).strip()
        if not query:
            raise MCPError(types.INVALID_PARAMS, "find_tools needs a non-empty 'query'")
        tools = tuple(await self.hub.list_tools())
        selection, chosen = await self.search.find(query, tools, profile=view.profile, ctx=ctx)
        promoted = promoted_of(session_connection(ctx.session), _stateless(ctx), self.search.shared_promoted)
        listed_all = await self.search.listing(view, self.search.visible(tools, view)) == "all"  # 'auto', few tools
        if promote(promoted, {tool.name for tool in chosen}) and not listed_all:
            # A client that cannot take the notification still gets the answer.
            with contextlib.suppress(Exception):
                if _stateless(ctx):
                    await self.hub.notifier.bus.publish(ToolsListChanged())
                else:
                    await ctx.session.send_tool_list_changed()
        return selection_result(selection, chosen, unavailable_tools(self.hub, (tool.name for tool in chosen)))

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        context = params.context.arguments if params.context is not None else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        return await self.hub.complete(params.ref, argument, context)

    async def set_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        await self.hub.set_logging_level(params.level, ctx.session)
        return types.EmptyResult()

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        await self.hub.subscriptions.subscribe(str(params.uri), ctx.session)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        await self.hub.subscriptions.unsubscribe(str(params.uri), ctx.session)
        return types.EmptyResult()

    async def list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[*await self.hub.list_resources(), status_resource()])

    async def list_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=await self.hub.list_resource_templates())

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        if str(params.uri) == STATUS_URI:
            return status_result(self.hub)
        return await self.hub.read_resource(str(params.uri), ctx=ctx, params=params)

    async def list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=await self.hub.list_prompts())

    async def get_prompt(
        self, ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        return await self.hub.get_prompt(params.name, params.arguments, ctx=ctx, params=params)

    async def listen(self, ctx: Ctx, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: the SDK's handler streams the events; the hub subscribes the servers first."""
        self.hub.notifier.track(ctx.session, ctx.protocol_version)
        key = object()
        uris = list(params.notifications.resource_subscriptions or ()) if params.notifications else []
        watched = await self.hub.subscriptions.listen(uris, key) if uris else []
        try:
            return await self.hub.notifier.listen_handler(ctx, params)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(UNSUBSCRIBE_TIMEOUT):
                for uri in watched:
                    with contextlib.suppress(HubError, MCPError):
                        await self.hub.subscriptions.unsubscribe(uri, key)

    async def roots_changed(self, ctx: Ctx, params: types.NotificationParams | None) -> None:
        """``notifications/roots/list_changed``: the client's project is looked up again on its next memory call."""
        self.hub.projects.forget(session_connection(ctx.session))

    def wrap(self, fn: Callable[[Ctx, Any], Awaitable[T]]) -> Callable[[Ctx, Any], Awaitable[T]]:
        async def wrapped(ctx: Ctx, params: Any) -> T:
            self.hub.notifier.track(ctx.session, ctx.protocol_version)
            async with _translated():
                return _unstamped(await fn(ctx, params))

        return wrapped


def build_server(hub: Hub) -> Server[Any]:
    """The hub's front server. Its lifespan is empty: whoever serves it holds ``Hub.open`` around it."""
    h = _Handlers(hub)
    hub.background(lambda: h.search.run_background(hub.list_tools))  # warm-up; closes the index at shutdown
    watch_status(hub)
    w = h.wrap
    with warnings.catch_warnings():  # setLevel, roots: deprecated in 2026-07-28; the hub serves both eras
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = Server(
            SERVER_NAME,
            version=__version__,
            title="hanzo-hub",
            description="One MCP server in front of many MCP tool servers.",
            on_list_tools=w(h.list_tools),
            on_call_tool=w(h.call_tool),
            on_list_resources=w(h.list_resources),
            on_list_resource_templates=w(h.list_templates),
            on_read_resource=w(h.read_resource),
            on_list_prompts=w(h.list_prompts),
            on_get_prompt=w(h.get_prompt),
            on_completion=w(h.complete),
            on_set_logging_level=w(h.set_level),
            on_subscribe_resource=w(h.subscribe),
            on_unsubscribe_resource=w(h.unsubscribe),
            on_subscriptions_listen=h.listen,
            on_roots_list_changed=h.roots_changed,
        )
    server.middleware.append(RawToolCalls(hub))
    return server


def initialization_options(server: Server[Any]) -> InitializationOptions:
    """Options announcing that every list may change (the hub aggregates servers that come and go)."""
    return server.create_initialization_options(
        NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
    )
