"""Search exposure: instead of hundreds of tools, clients see ``find_tools``, ``call_tool`` and a few core tools.

``find_tools(query)`` ranks every exposed tool with the selection pipeline (BM25 fused with dense embeddings; the
model loads on the first search, off the event loop) and returns the chosen tools' full definitions within the
token budget. The chosen tools are then promoted into that client's ``tools/list`` (with ``list_changed``), and
``call_tool(name, arguments)`` invokes any tool by its exposed name. The index is rebuilt when the tool list changes.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp import MCPDeprecationWarning
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from hanzo_hub.catalog.tool_vectors import load_tool_vectors
from hanzo_hub.config import EmbeddingSettings, ExposureSettings
from hanzo_hub.config.exposure import ExposureMode
from hanzo_hub.errors import CompletionError, HubError, VectorStoreError
from hanzo_hub.hub.auto_exposure import AutoListing, Listing, listing_for
from hanzo_hub.llm.types import Caller, ChatMessage, ChatRequest, ChatResult, Completer, StreamEvent
from hanzo_hub.selection.adapter import QueryAdapter, adapter_for
from hanzo_hub.selection.dense import SyncStats
from hanzo_hub.selection.llm_filter import LlmFilter
from hanzo_hub.selection.pipeline import DEFAULT_TEXT, Selection, Stage2Filter, ToolSelector
from hanzo_hub.selection.text import content_hash, tool_text
from hanzo_hub.vectors import VECTOR_STORES, build_embedder, load_impl
from hanzo_hub.vectors.base import Embedder, VectorStore, embed_queries

logger = logging.getLogger(__name__)

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
PROMOTED_KEY = "hanzo_hub.promoted_tools"

META_TOOLS = (
    types.Tool(
        name=FIND_TOOLS,
        description=(
            "Find the tools that can do a task. Describe the task in plain words; returns the best-matching tools "
            "with their full definitions (name, description, input schema), best first. Then call one with "
            "call_tool, or directly by its name."
        ),
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What you want to do, in plain words."}},
            "required": ["query"],
        },
    ),
    types.Tool(
        name=CALL_TOOL,
        description="Call any tool by its exact name (as returned by find_tools) with its arguments.",
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's exact name."},
                "arguments": {"type": "object", "description": "The tool's arguments, matching its input schema."},
            },
            "required": ["name"],
        },
    ),
)


class UnknownProfile(ValueError):
    """A client asked (by header or query parameter) for a profile that is not configured."""


@dataclass(frozen=True, slots=True)
class ClientView:
    """What one client gets: its exposure mode and the profile (if any) that limits its tools."""

    mode: ExposureMode
    profile: str | None
    client: str | None


def needs_front(settings: ExposureSettings) -> bool:
    """Whether every call must go through the front: a client may be in search mode or on a profile (the fast path
    steps aside). In 'auto' the fast path stays, leaving ``find_tools`` and ``call_tool`` to the front."""
    return settings.mode == "search" or bool(settings.profiles) or any(c.mode for c in settings.clients.values())


def client_name(ctx: Any) -> str | None:
    """The name the client gave in clientInfo: from ``initialize`` (handshake era) or the request's ``_meta``."""
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        info = ((ctx.params or {}).get("_meta") or {}).get(types.CLIENT_INFO_META_KEY)
        return str(info["name"]) if isinstance(info, dict) and info.get("name") else None
    params = getattr(ctx.session, "client_params", None)
    return params.client_info.name if params is not None else None


def _requested_profile(ctx: Any, header: str) -> str | None:
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    value = headers.get(header) or getattr(request, "query_params", {}).get("profile")
    return str(value) if value else None


class SamplingCompleter:
    """A ``Completer`` that asks the client's own model through MCP sampling (handshake-era sessions only)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    @staticmethod
    def available(ctx: Any) -> bool:
        """Whether the client of ``ctx`` declared the sampling capability on a session that can send requests."""
        if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return False
        params = getattr(ctx.session, "client_params", None)
        return params is not None and params.capabilities.sampling is not None

    async def chat(self, request: ChatRequest, *, caller: Caller) -> ChatResult:
        system = "\n".join(m.text() for m in request.messages if m.role == "system") or None
        messages = [
            types.SamplingMessage(role=m.role, content=types.TextContent(type="text", text=m.text()))
            for m in request.messages
            if m.role in ("user", "assistant")
        ]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                result = await self._session.create_message(
                    messages, max_tokens=request.max_tokens, system_prompt=system, temperature=request.temperature
                )
        except Exception as exc:  # the client's error, a closed session: either way stage 2 is skipped
            raise CompletionError(f"client sampling failed: {exc}") from exc
        content = result.content
        text = content.text if isinstance(content, types.TextContent) else ""
        return ChatResult(
            model=result.model or "client", provider="sampling", message=ChatMessage(role="assistant", content=text)
        )

    async def stream(self, request: ChatRequest, *, caller: Caller) -> Any:  # pragma: no cover - protocol filler
        result = await self.chat(request, caller=caller)
        yield StreamEvent(kind="text", text=result.message.text())
        yield StreamEvent(kind="done", result=result)


Describe = Callable[[str], tuple[str, str]]
"""Exposed tool name -> (server name, catalog category); both '' when unknown."""


def tool_describer(hub: Any) -> Describe:
    """Server and catalog category of an exposed tool, for the tool's search text (the benchmark's text too)."""
    try:
        from hanzo_hub.catalog.loader import load_catalog

        categories = {i: str(e.meta.category) for i, e in load_catalog(hub.settings).entries.items()}
    except HubError as exc:
        logger.warning("tool search: no catalog categories (%s)", exc)
        categories = {}

    def describe(name: str) -> tuple[str, str]:
        try:
            server = hub.registry.resolve_tool(name).server
        except HubError:
            return "", ""
        entry = hub.catalog_entries.get(server)  # a catalog instance has its own name
        return server, str(entry.meta.category) if entry is not None else categories.get(server, "")

    return describe


class ToolSearch:
    """Ranks the hub's exposed tools for a query; rebuilds its index when the tools change.

    ``completer`` (or ``completer_of()``, read at each search, since the hub's gateway starts after the front) is
    the routing layer's: stage 2 of ``find_tools`` goes through it, or the client's sampling, per
    ``exposure.llm_filter``. Profiles and per-client modes are resolved by ``view``.
    """

    def __init__(
        self,
        settings: ExposureSettings,
        completer: Completer | None = None,
        *,
        completer_of: Callable[[], Completer | None] | None = None,
        home: Path | None = None,
        describe: Describe | None = None,
        embedding: EmbeddingSettings | None = None,
    ) -> None:
        self._settings = settings
        self._embedding = embedding
        self._describe = describe
        self._completer_of = completer_of or (lambda: completer)
        self._home = home
        self._store: VectorStore | None = None
        self.sync_stats: SyncStats | None = None
        self._embedder: Embedder | None = None
        self._indexed: tuple[types.Tool, ...] | None = None
        self._selector: ToolSelector | None = None
        self._adapter: tuple[QueryAdapter | None] | None = None  # loaded once per embedder, not per re-index
        self._lock = anyio.Lock()
        self._store_failed = False
        self.shared_promoted: dict[str, None] = {}
        self.auto = AutoListing(settings.auto_search_tokens)

    def _embedder_for_search(self) -> Embedder | None:
        if self._settings.embedder == "none":
            return None
        if self._embedder is None:
            settings = self._settings
            self._embedder = build_embedder(
                settings.embedder, self._embedding, home=self._home, model_path=settings.model_path
            )
        return self._embedder

    def _query_adapter(self, embedder: Embedder) -> QueryAdapter | None:
        """``exposure.query_adapter`` for ``embedder`` (blocking: the bundled one embeds its probe texts)."""
        return adapter_for(self._settings.query_adapter, embedder)

    def _store_for_index(self) -> VectorStore | None:
        """The persistent copy of the tool vectors (embedded Chroma under the home, or a Chroma server)."""
        settings = self._settings
        if self._store is None and settings.index_store == "chroma" and (self._home or settings.index_path):
            path = settings.index_path or (self._home / "tool-index" if self._home else None)
            self._store = load_impl(VECTOR_STORES, "chroma")(
                path, "tools", host=settings.chroma_host, port=settings.chroma_port
            )
        return self._store

    async def aclose(self) -> None:
        """Close the vector store, if one was opened."""
        if self._store is not None:
            await self._store.aclose()
            self._store = None

    async def run_background(self, tools_of: Callable[[], Awaitable[Sequence[types.Tool]]]) -> None:
        """The hub's background task for tool search: warm the index (search mode with ``warm_index``), then wait
        for shutdown and close the store. Never raises: a failed warm-up only means the first query pays."""
        try:
            settings = self._settings
            if settings.warm_index and settings.embedder != "none" and await self._search_at_start(tools_of):
                await self.warm(tools_of)
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.aclose()

    async def _search_at_start(self, tools_of: Callable[[], Awaitable[Sequence[types.Tool]]]) -> bool:
        """Whether the deployment's clients get search's list once the hub has discovered its tools."""
        mode = self._settings.mode
        if mode != "auto":
            return mode == "search"
        view = ClientView(mode, self._settings.profile, None)
        try:
            tools = await tools_of()
        except HubError:
            return False
        return await self.listing(view, self.visible(tools, view)) == "search"

    async def listing(self, view: ClientView, tools: Sequence[types.Tool]) -> Listing:
        """Which list the client of ``view`` gets for ``tools`` (its profile's): see ``hub.auto_exposure``."""
        return await listing_for(view.mode, tools, self.auto)

    async def warm(self, tools_of: Callable[[], Awaitable[Sequence[types.Tool]]]) -> bool:
        """Load the model, build/sync the index and open the query path within ``warm_index_timeout`` seconds; whether
        it finished."""
        started = time.perf_counter()
        with anyio.move_on_after(self._settings.warm_index_timeout) as scope:
            try:
                await self._index(tuple(await tools_of()))
                if self._embedder is not None:
                    await embed_queries(self._embedder, ["warm up the query path"])  # int8 encoder, if configured
            except HubError as exc:
                logger.warning("tool search warm-up failed: %s", exc)
                return False
        if scope.cancelled_caught:
            logger.warning("tool search warm-up stopped after %.0f s", self._settings.warm_index_timeout)
            return False
        logger.info("tool search warm-up done in %.1f s (%s)", time.perf_counter() - started, self.sync_stats)
        return True

    def texts(self, tools: Sequence[types.Tool]) -> list[str]:
        """The texts the index embeds for ``tools`` (what the shipped vectors' hashes are computed from)."""
        return [tool_text(self._row(tool), DEFAULT_TEXT) for tool in tools]

    def hashes(self, tools: Sequence[types.Tool], model_id: str) -> list[str]:
        """The index's content hashes of ``tools`` under ``model_id``."""
        return [content_hash(text, model_id) for text in self.texts(tools)]

    async def _index(self, tools: tuple[types.Tool, ...]) -> ToolSelector:
        async with self._lock:
            if self._selector is None or (self._indexed is not tools and self._indexed != tools):
                rows = [self._row(tool) for tool in tools]
                embedder = self._embedder_for_search()
                store = self._store_for_index() if embedder is not None else None
                seeds = None
                if store is not None and embedder is not None:
                    seeds = await anyio.to_thread.run_sync(load_tool_vectors, embedder.model_id)
                if embedder is not None and self._adapter is None:
                    self._adapter = (await anyio.to_thread.run_sync(self._query_adapter, embedder),)
                adapter = self._adapter[0] if embedder is not None and self._adapter is not None else None

                async def build(store: VectorStore | None) -> ToolSelector:
                    return await ToolSelector.build(
                        rows,
                        embedder=embedder,
                        store=store,
                        seeds=seeds,
                        query_adapter=adapter,
                        core_tools=self._settings.core_tools,
                        max_tools=self._settings.max_tools,
                        token_budget=self._settings.token_budget,
                    )

                try:
                    self._selector = await build(store)
                except VectorStoreError as exc:
                    if store is None or self._store_failed:
                        raise
                    # A full disk or a Chroma server that is down must not take tool search with it: keep the
                    # vectors in memory for this run (the shipped ones still spare the embedding).
                    logger.warning("tool index unusable (%s); keeping it in memory until the hub restarts", exc)
                    self._store_failed = True
                    with contextlib.suppress(HubError):
                        await store.aclose()
                    self._store = load_impl(VECTOR_STORES, "memory")()
                    self._selector = await build(self._store)
                self._indexed = tools
                self.sync_stats = self._selector.sync_stats
            return self._selector

    def _row(self, tool: types.Tool) -> dict[str, Any]:
        prefix = tool.name.split("__", 1)[0] if "__" in tool.name else ""
        server, category = self._describe(tool.name) if self._describe is not None else ("", "")
        return {
            "name": tool.name,
            "description": tool.description or "",
            "inputSchema": tool.input_schema,
            "server": server or prefix,
            "category": category,
            "tool_id": tool.name,
        }

    async def find(
        self,
        query: str,
        tools: tuple[types.Tool, ...],
        *,
        profile: str | None = None,
        ctx: Any = None,
    ) -> tuple[Selection, list[types.Tool]]:
        """The selection for ``query`` among the tools of ``profile`` and their definitions, best first.

        One index covers every tool whatever the profile; a profile only filters the stage-1 ranking.
        """
        selector = await self._index(tools)
        allowed = self.allowed(profile) if profile else None
        selection = await selector.select(
            query, stage2=self.stage2_for(ctx), allowed=allowed, candidates=self._settings.stage1_candidates
        )
        by_name = {tool.name: tool for tool in tools}
        return selection, [by_name[c.id] for c in selection.tools if c.id in by_name]

    def stage2_for(self, ctx: Any) -> Stage2Filter | None:
        """The LLM filter for a ``find_tools`` call: the router's completer or the client's sampling, per settings."""
        choice = self._settings.llm_filter
        timeout = self._settings.llm_filter_timeout
        completer = self._completer_of()
        if choice in ("router", "auto") and completer is not None:
            return LlmFilter(completer, timeout=timeout)
        if choice in ("sampling", "auto") and ctx is not None and SamplingCompleter.available(ctx):
            return LlmFilter(SamplingCompleter(ctx.session), timeout=timeout)
        return None

    def view(self, ctx: Any) -> ClientView:
        """The mode and profile of the client of ``ctx``: an HTTP header or query parameter picks the profile,
        then ``exposure.clients[clientInfo.name]``, then the deployment's settings.

        Raises:
            UnknownProfile: the header or query parameter names a profile that is not configured.
        """
        settings = self._settings
        name = client_name(ctx) if ctx is not None else None
        per_client = settings.clients.get(name) if name else None
        mode = (per_client.mode if per_client else None) or settings.mode
        profile = (per_client.profile if per_client else None) or settings.profile
        requested = _requested_profile(ctx, settings.profile_header) if ctx is not None else None
        if requested is not None:
            if requested not in settings.profiles:
                raise UnknownProfile(f"unknown profile {requested!r}; configured: {sorted(settings.profiles)}")
            profile = requested
        return ClientView(mode, profile, name)

    def allowed(self, profile: str | None) -> Callable[[str], bool]:
        """Whether an exposed tool name belongs to ``profile`` (every name when there is none)."""
        if profile is None:
            return lambda name: True
        spec = self._settings.profiles[profile]
        servers = tuple(f"{server}__" for server in spec.servers)
        names = set(spec.tools) | set(self._settings.core_tools)
        return lambda name: name in names or name.startswith(servers)

    def visible(self, tools: Sequence[types.Tool], view: ClientView) -> list[types.Tool]:
        """The tools of the client's profile."""
        keep = self.allowed(view.profile)
        return [tool for tool in tools if keep(tool.name)]

    def listed(self, tools: tuple[types.Tool, ...], promoted: set[str] | dict[str, None]) -> list[types.Tool]:
        """What ``tools/list`` shows in search mode: the meta tools, core tools, then this client's promoted tools."""
        keep = (set(self._settings.core_tools) | set(promoted)) - {FIND_TOOLS, CALL_TOOL}  # the hub's names win
        return [*META_TOOLS, *(tool for tool in tools if tool.name in keep)]


SHARED_PROMOTED_MAX = 64
"""Stateless-era clients have no connection to remember promotions on; they share the latest ones, up to this many."""


def promoted_of(connection: Any, stateless: bool, shared: dict[str, None]) -> set[str] | dict[str, None]:
    """The tools promoted for a client: its connection's own set, or the hub-wide recent set for stateless clients."""
    if stateless:
        return shared
    state: dict[str, Any] = connection.state
    promoted: set[str] = state.setdefault(PROMOTED_KEY, set())
    return promoted


def promote(promoted: set[str] | dict[str, None], names: set[str]) -> bool:
    """Add ``names``; returns whether anything was new. The shared set keeps only the most recent entries."""
    new = names - set(promoted)
    if isinstance(promoted, set):
        promoted |= new
        return bool(new)
    for name in names:
        promoted.pop(name, None)
        promoted[name] = None
    while len(promoted) > SHARED_PROMOTED_MAX:
        del promoted[next(iter(promoted))]
    return bool(new)


def selection_result(
    selection: Selection, chosen: list[types.Tool], unavailable: dict[str, str] | None = None
) -> types.CallToolResult:
    """``find_tools``' answer: the definitions as structured content, a readable summary as text; ``unavailable``
    gives, for chosen tools whose server cannot answer now, why (``hub/status.py``)."""
    unavailable = unavailable or {}
    definitions = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in chosen]
    scores = {c.id: round(c.score, 4) for c in selection.tools}
    lines = [
        f"{tool.name}: {next(iter((tool.description or '').strip().splitlines()), '')[:160]}"
        + (f" [server {unavailable[tool.name]}]" if tool.name in unavailable else "")
        for tool in chosen
    ]
    text = "\n".join(lines) if lines else "No matching tools."
    structured = {
        "tools": definitions,
        "scores": [scores.get(tool.name) for tool in chosen],
        "tokens": selection.tokens,
        "all_tools_tokens": selection.all_tokens,
        "llm_filter": selection.stage2,
        "note": selection.stage2_note,
        "query_adapter": selection.query_adapter,
        "unavailable": unavailable,
    }
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)
