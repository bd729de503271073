"""The memory MCP surface: tools and resource templates on an ``MCPServer``, scoped by a caller-supplied provider.

The hub decides who is asking: ``scope_of(ctx)`` returns the caller's ``MemoryScope`` (the authenticated user, the
project from the client's MCP roots or an explicit id, and the MCP session). Every tool and resource goes through
it, and the service can only address the scopes it returns, so no answer can contain another user's or project's
memories. Tools: ``remember``, ``recall``, ``list_memories``, ``update_memory``, ``forget``, ``export_memories``,
``import_memories``, ``consolidate``. Resources: ``memory://{tier}/entries`` (a scope listing) and
``memory://{tier}/entries/{memory_id}``, with update notifications when they change.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar, cast

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import BaseModel, Field

from hanzo_hub.errors import HubError
from hanzo_hub.memory.consolidate import Consolidator
from hanzo_hub.memory.models import TIERS, MemoryEntry, MemoryScope, Tier
from hanzo_hub.memory.service import MemoryFilter, MemoryService
from hanzo_hub.memory.summarize import SessionSummarizer

ScopeProvider = Callable[[Context[Any, Any]], Awaitable[MemoryScope]]
"""Returns the caller's scope for a request; the hub builds it from authentication and MCP roots."""

LIST_LIMIT = 200


class MemoryView(BaseModel):
    """A memory as tools return it."""

    id: str
    content: str
    tier: Tier
    tags: list[str]
    relevance: float
    source: str
    created_at: float
    accessed_at: float
    access_count: int
    superseded_by: str | None = None

    @classmethod
    def of(cls, entry: MemoryEntry) -> MemoryView:
        """The view of ``entry``."""
        data = entry.to_dict()
        return cls(**{k: data[k] for k in cls.model_fields})


class RecallItem(BaseModel):
    """A recalled memory with the reason it was returned."""

    memory: MemoryView
    score: float
    why: str


class RecallResult(BaseModel):
    """Recalled memories, best first, within the token budget."""

    results: list[RecallItem]
    tokens: int


class MemoriesResult(BaseModel):
    """A list of memories."""

    memories: list[MemoryView]
    total: int


class ForgetResult(BaseModel):
    """Ids of the deleted memories."""

    forgotten: list[str]


class ExportResult(BaseModel):
    """The caller's memories as JSON Lines."""

    count: int
    jsonl: str


class ConsolidateResult(BaseModel):
    """What a consolidation pass over the caller's scopes did: ids per step, and the steps it skipped and why."""

    superseded: list[str]
    promoted: list[str]
    generalized: list[str]
    decayed: list[str]
    deleted: list[str]
    skipped: list[str]


def entries_uri(tier: str) -> str:
    """The listing resource of the caller's ``tier``."""
    return f"memory://{tier}/entries"


def entry_uri(tier: str, memory_id: str) -> str:
    """The resource of one memory."""
    return f"memory://{tier}/entries/{memory_id}"


async def _notify(ctx: Context[Any, Any], entries: Sequence[tuple[str, str]]) -> None:
    uris = {entries_uri(tier) for tier, _ in entries} | {entry_uri(t, i) for t, i in entries}
    for uri in sorted(uris):
        await ctx.notify_resource_updated(uri)


_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def _anticipated(error: type[Exception]) -> Callable[[_F], _F]:
    """Our own errors (a full disk under the store, a store in use, a missing model, an unknown id) reach the caller
    as ``error`` with their message, which is written for a client; anything else stays a crash the SDK hides."""

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except HubError as exc:
                raise error(str(exc)) from exc

        return cast(_F, run)

    return decorate


def _tiers(tier: str | None) -> tuple[Tier, ...]:
    if tier is None:
        return TIERS
    if tier not in TIERS:
        raise ToolError(f"tier must be one of {', '.join(TIERS)}")
    return (tier,)


def build_memory_server(
    service: MemoryService,
    scope_of: ScopeProvider,
    *,
    name: str = "memory",
    summarizer: SessionSummarizer | None = None,
    consolidator: Consolidator | None = None,
    lifespan: Any = None,
) -> MCPServer:
    """An ``MCPServer`` exposing ``service`` to callers scoped by ``scope_of`` (``lifespan`` runs around it)."""
    extra = {"lifespan": lifespan} if lifespan is not None else {}
    mcp: MCPServer = MCPServer(name, instructions="Long-term memory: remember facts, recall them later.", **extra)
    summarize = summarizer or SessionSummarizer(service)
    _register_write_tools(mcp, service, scope_of, summarize)
    _register_consolidate(mcp, consolidator or Consolidator(service), scope_of)
    _register_read_tools(mcp, service, scope_of)
    _register_resources(mcp, service, scope_of)
    return mcp


def _register_write_tools(
    mcp: MCPServer, service: MemoryService, scope_of: ScopeProvider, summarizer: SessionSummarizer
) -> None:
    @mcp.tool(description="Store a memory: tier session (until this connection ends), project (default) or global.")
    @_anticipated(ToolError)
    async def remember(
        content: str, ctx: Context[Any, Any], tier: Literal["session", "project", "global"] = "project",
        tags: list[str] | None = None,
    ) -> MemoryView:  # fmt: skip
        scope = await scope_of(ctx)
        (entry,) = await service.remember(scope, [content], tier=tier, tags=tags or (), source=f"tool:{scope.session}")
        await _notify(ctx, [(tier, entry.id)])
        if tier == "session":
            await summarizer.maybe_summarize(scope)
        return MemoryView.of(entry)

    @mcp.tool(description="Change a memory's content, tags or relevance.")
    @_anticipated(ToolError)
    async def update_memory(
        memory_id: str, ctx: Context[Any, Any], content: str | None = None, tags: list[str] | None = None,
        relevance: float | None = Field(default=None, ge=0, le=1),
    ) -> MemoryView:  # fmt: skip
        scope = await scope_of(ctx)
        entry = await service.update(scope, memory_id, content=content, tags=tags, relevance=relevance)
        await _notify(ctx, [(entry.tier, entry.id)])
        return MemoryView.of(entry)

    @mcp.tool(description="Delete memories: by id, by filter, or all=true for every memory of the tier(s).")
    @_anticipated(ToolError)
    async def forget(
        ctx: Context[Any, Any], memory_id: str | None = None, tier: str | None = None, tag: str | None = None,
        contains: str | None = None, all: bool = False,
    ) -> ForgetResult:  # fmt: skip
        if memory_id is None and tag is None and contains is None and not all:
            raise ToolError("give memory_id, a filter (tag, contains) or all=true")
        scope = await scope_of(ctx)
        where = MemoryFilter(tiers=_tiers(tier), ids=(memory_id,) if memory_id else (), tag=tag, contains=contains)
        before = {e.id: e.tier for e in await service.entries(scope, where)}
        removed = await service.forget(scope, where)
        await _notify(ctx, [(before[i], i) for i in removed])
        return ForgetResult(forgotten=removed)

    @mcp.tool(description="Import memories from JSON Lines into your own scope (re-embedded).")
    @_anticipated(ToolError)
    async def import_memories(jsonl: str, ctx: Context[Any, Any], tier: str | None = None) -> MemoriesResult:
        scope = await scope_of(ctx)
        entries = await service.import_jsonl(scope, jsonl, tier=_tiers(tier)[0] if tier else None)
        await _notify(ctx, [(e.tier, e.id) for e in entries])
        return MemoriesResult(memories=[MemoryView.of(e) for e in entries], total=len(entries))


def _register_consolidate(mcp: MCPServer, consolidator: Consolidator, scope_of: ScopeProvider) -> None:
    @mcp.tool(
        description="Tidy your memories now (the hub also does it on a schedule): merge near-duplicates (the older "
        "is kept, marked superseded), promote often-read session memories to the project, decay and delete "
        "long-unused ones."
    )
    @_anticipated(ToolError)
    async def consolidate(ctx: Context[Any, Any]) -> ConsolidateResult:
        report = await consolidator.run(await scope_of(ctx))
        return ConsolidateResult(**dataclasses.asdict(report))


def _register_read_tools(mcp: MCPServer, service: MemoryService, scope_of: ScopeProvider) -> None:
    @mcp.tool(description="Recall memories relevant to a query, best first, each with why it was returned.")
    @_anticipated(ToolError)
    async def recall(
        query: str, ctx: Context[Any, Any], tier: str | None = None, limit: int | None = Field(default=None, ge=1),
        token_budget: int | None = Field(default=None, ge=1),
    ) -> RecallResult:  # fmt: skip
        scope = await scope_of(ctx)
        hits = await service.recall(scope, query, tiers=_tiers(tier), token_budget=token_budget, limit=limit)
        items = [RecallItem(memory=MemoryView.of(h.entry), score=h.score, why=h.why) for h in hits]
        return RecallResult(results=items, tokens=sum(h.entry.tokens for h in hits))

    @mcp.tool(description="List memories, oldest first, optionally filtered by tier, tag or text.")
    @_anticipated(ToolError)
    async def list_memories(
        ctx: Context[Any, Any], tier: str | None = None, tag: str | None = None, contains: str | None = None,
        offset: int = Field(default=0, ge=0), limit: int = Field(default=50, ge=1, le=LIST_LIMIT),
    ) -> MemoriesResult:  # fmt: skip
        scope = await scope_of(ctx)
        found = await service.entries(scope, MemoryFilter(tiers=_tiers(tier), tag=tag, contains=contains))
        return MemoriesResult(memories=[MemoryView.of(e) for e in found[offset : offset + limit]], total=len(found))

    @mcp.tool(description="Export your memories as JSON Lines.")
    @_anticipated(ToolError)
    async def export_memories(ctx: Context[Any, Any], tier: str | None = None) -> ExportResult:
        scope = await scope_of(ctx)
        jsonl = await service.export(scope, _tiers(tier))
        return ExportResult(count=jsonl.count("\n"), jsonl=jsonl)


def _register_resources(mcp: MCPServer, service: MemoryService, scope_of: ScopeProvider) -> None:
    @mcp.resource("memory://{tier}/entries", name="memories", mime_type="application/json",
                  description="Your memories of one tier (session, project or global).")  # fmt: skip
    @_anticipated(ResourceError)
    async def listing(tier: str, ctx: Context[Any, Any]) -> str:
        scope = await scope_of(ctx)
        found = await service.entries(scope, MemoryFilter(tiers=_tiers(tier)))
        return json.dumps([MemoryView.of(e).model_dump() for e in found])

    @mcp.resource("memory://{tier}/entries/{memory_id}", name="memory", mime_type="application/json",
                  description="One of your memories.")  # fmt: skip
    @_anticipated(ResourceError)
    async def one(tier: str, memory_id: str, ctx: Context[Any, Any]) -> str:
        scope = await scope_of(ctx)
        found = await service.entries(scope, MemoryFilter(tiers=_tiers(tier), ids=(memory_id,)))
        if not found:
            raise ToolError(f"no memory {memory_id!r} in your {tier} tier")
        return MemoryView.of(found[0]).model_dump_json()
