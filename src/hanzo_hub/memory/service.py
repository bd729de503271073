"""The memory API the surface, summarizer and consolidator use: every call takes the caller's ``MemoryScope``.

A caller can only ever name its own scopes (``MemoryScope.key(tier)``), so every read, listing, update, delete and
export is confined to the caller's user and project by construction, not by filtering.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import numpy as np

from hanzo_hub.config import MemorySettings
from hanzo_hub.errors import MemoryStoreError
from hanzo_hub.memory.adapter import memory_adapter
from hanzo_hub.memory.decay import plan_retention
from hanzo_hub.memory.models import TIERS, MemoryEntry, MemoryScope, ScopeKey, Tier, new_id
from hanzo_hub.memory.rerank import CrossEncoderReranker
from hanzo_hub.memory.store import MemoryStore, ScopeIndex
from hanzo_hub.memory.tiers import RecallHit, TieredRetriever
from hanzo_hub.selection.adapter import QueryAdapter
from hanzo_hub.vectors import Embedder, embed_queries

ChangeListener = Callable[[ScopeKey, Sequence[str]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a listing or ``forget`` applies to; empty fields match everything."""

    tiers: tuple[Tier, ...] = TIERS
    ids: tuple[str, ...] = ()
    tag: str | None = None
    contains: str | None = None
    source: str | None = None
    include_superseded: bool = True

    def matches(self, entry: MemoryEntry) -> bool:
        """Whether ``entry`` passes every set field."""
        return (
            (not self.ids or entry.id in self.ids)
            and (self.tag is None or self.tag in entry.tags)
            and (self.contains is None or self.contains.lower() in entry.content.lower())
            and (self.source is None or entry.source == self.source)
            and (self.include_superseded or entry.superseded_by is None)
        )


class MemoryService:
    """Embeds, stores and recalls memories for scoped callers."""

    def __init__(
        self, store: MemoryStore, embedder: Embedder, settings: MemorySettings, clock: Callable[[], float]
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.clock = clock
        reranker = CrossEncoderReranker(settings.reranker) if settings.reranker is not None else None
        self.retriever = TieredRetriever(settings, clock, reranker)
        self._listeners: list[ChangeListener] = []
        self._adapter: tuple[QueryAdapter | None] | None = None
        self._adapter_lock = anyio.Lock()
        store.on_open = self._retain

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        settings: MemorySettings,
        root: Path | None,
        embedder: Embedder,
        clock: Callable[[], float] = time.time,
    ) -> AsyncIterator[MemoryService]:
        """Open the store under ``root`` (ignored for ``store="memory"``) for the life of the context.

        Raises:
            MemoryStoreError: the store folder is in use or unreadable.
        """
        async with MemoryStore.open(settings, root) as store:
            yield cls(store, embedder, settings, clock)

    async def _retain(self, index: ScopeIndex) -> None:
        """Retention as a persisted scope opens, before anyone reads it: a memory idle past ``delete_after_days``
        is never returned, and relevance has decayed, even where no consolidation ran while the scope was closed
        (the scheduled job only visits open scopes). Vectors are read only when something decays."""
        plan = plan_retention(index.entries.values(), self.clock(), self.settings)
        if plan.expired:
            await index.delete(plan.expired)
        if plan.decayed:
            vectors = {e.id: e.embedding for e in await index.with_embeddings()}
            await index.put([e.evolve(embedding=vectors[e.id]) for e in plan.decayed if e.id in vectors])

    def on_change(self, listener: ChangeListener) -> None:
        """Call ``listener(scope_key, ids)`` after every change (resource update notifications)."""
        self._listeners.append(listener)

    async def _changed(self, key: ScopeKey, ids: Sequence[str]) -> None:
        for listener in self._listeners:
            await listener(key, ids)

    async def indexes(self, scope: MemoryScope, tiers: Iterable[Tier] = TIERS) -> dict[Tier, ScopeIndex]:
        """The caller's own scope indexes for ``tiers`` (asking for the session tier counts as the session's use)."""
        found = {tier: await self.store.scope(scope.key(tier)) for tier in tiers}
        if "session" in found:
            self.store.session_used(scope.key("session").session, self.clock())
        return found

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` with the configured embedder."""
        return await self.embedder.embed(texts)

    async def query_adapter(self) -> QueryAdapter | None:
        """The map applied to recall queries (``memory.query_adapter``), resolved on first use.

        Raises:
            ConfigError: a configured adapter file cannot be read or does not fit the embedder.
        """
        async with self._adapter_lock:
            if self._adapter is None:
                adapter = await anyio.to_thread.run_sync(memory_adapter, self.settings.query_adapter, self.embedder)
                self._adapter = (adapter,)
            return self._adapter[0]

    async def remember(
        self,
        scope: MemoryScope,
        contents: Sequence[str],
        *,
        tier: Tier = "project",
        tags: Sequence[str] = (),
        source: str = "",
        relevance: float = 1.0,
    ) -> list[MemoryEntry]:
        """Store ``contents`` as new memories of the caller's ``tier``; returns them once durable."""
        if not contents:
            return []
        key = scope.key(tier)
        now = self.clock()
        vectors = await self.embed(contents)
        entries = [
            MemoryEntry(
                id=new_id(), content=text, user=key.user, project=key.project, tier=tier, session=key.session,
                created_at=now, accessed_at=now, relevance=max(0.0, min(1.0, relevance)),
                source=source or f"session:{scope.session}", tags=tuple(tags), embedding=tuple(vec),
            )
            for text, vec in zip(contents, vectors, strict=True)
        ]  # fmt: skip
        await self.put(entries)
        return entries

    async def put(self, entries: Sequence[MemoryEntry]) -> None:
        """Store fully formed entries (with embeddings), grouped by their scopes."""
        groups: dict[ScopeKey, list[MemoryEntry]] = {}
        for entry in entries:
            groups.setdefault(entry.scope, []).append(entry)
        for key, group in groups.items():
            index = await self.store.scope(key)
            await index.put(group)
            await self._changed(key, [e.id for e in group])

    async def recall(
        self,
        scope: MemoryScope,
        query: str,
        *,
        tiers: Iterable[Tier] = TIERS,
        token_budget: int | None = None,
        limit: int | None = None,
    ) -> list[RecallHit]:
        """Recall memories for ``query`` from the caller's tiers; records an access on each hit."""
        indexes = await self.indexes(scope, tiers)
        vector = (await embed_queries(self.embedder, [query]))[0]  # the query path: int8 where configured
        adapter = await self.query_adapter()
        if adapter is not None:
            vector = adapter(np.asarray([vector], dtype=np.float32))[0].tolist()
        hits = await self.retriever.recall(indexes, query, vector, token_budget=token_budget, limit=limit)
        now = self.clock()
        for tier, index in indexes.items():
            index.touch((h.entry.id for h in hits if h.tier == tier), now)
        return [dataclasses.replace(h, entry=indexes[h.tier].entries[h.entry.id]) for h in hits]

    async def entries(self, scope: MemoryScope, where: MemoryFilter = MemoryFilter()) -> list[MemoryEntry]:
        """The caller's memories matching ``where``, oldest first."""
        found: list[MemoryEntry] = []
        for index in (await self.indexes(scope, where.tiers)).values():
            found.extend(e for e in index.entries.values() if where.matches(e))
        found.sort(key=lambda e: (e.created_at, e.id))
        return found

    async def get(self, scope: MemoryScope, memory_id: str) -> MemoryEntry:
        """One of the caller's memories by id.

        Raises:
            MemoryStoreError: no memory of that id exists in the caller's scopes.
        """
        for index in (await self.indexes(scope)).values():
            entry = index.entries.get(memory_id)
            if entry is not None:
                return entry
        raise MemoryStoreError(f"no memory {memory_id!r} in this scope")

    async def update(
        self,
        scope: MemoryScope,
        memory_id: str,
        *,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        relevance: float | None = None,
    ) -> MemoryEntry:
        """Change a memory in place (re-embedding changed content).

        Raises:
            MemoryStoreError: no memory of that id exists in the caller's scopes.
        """
        entry = await self.get(scope, memory_id)
        index = await self.store.scope(entry.scope)
        full = next(e for e in await index.with_embeddings() if e.id == memory_id)
        changes: dict[str, object] = {"accessed_at": self.clock()}
        if content is not None and content != entry.content:
            changes["content"] = content
            changes["embedding"] = tuple((await self.embed([content]))[0])
        if tags is not None:
            changes["tags"] = tuple(tags)
        if relevance is not None:
            changes["relevance"] = max(0.0, min(1.0, relevance))
        updated = full.evolve(**changes)
        await self.put([updated])
        return index.entries[memory_id]

    async def forget(self, scope: MemoryScope, where: MemoryFilter) -> list[str]:
        """Delete the caller's memories matching ``where``; returns their ids."""
        removed: list[str] = []
        for tier, index in (await self.indexes(scope, where.tiers)).items():
            ids = [e.id for e in index.entries.values() if where.matches(e)]
            gone = await index.delete(ids)
            removed.extend(gone)
            if gone:
                await self._changed(scope.key(tier), gone)
        return removed

    async def export(self, scope: MemoryScope, tiers: Iterable[Tier] = TIERS) -> str:
        """The caller's memories as JSON Lines (no embeddings)."""
        entries = await self.entries(scope, MemoryFilter(tiers=tuple(tiers)))
        return "".join(e.to_json() + "\n" for e in entries)

    async def import_jsonl(self, scope: MemoryScope, jsonl: str, *, tier: Tier | None = None) -> list[MemoryEntry]:
        """Import JSON Lines into the caller's own scopes (whatever scope the lines name), re-embedded.

        Raises:
            MemoryStoreError: a line is not a memory object.
        """
        parsed: list[MemoryEntry] = []
        for number, line in enumerate(jsonl.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if "created_at" not in data:
                    now = self.clock()
                    data = {"created_at": now, "accessed_at": now, **data}
                raw = MemoryEntry.from_dict({"id": new_id(), "user": "", "project": "", "tier": "project", **data})
            except (ValueError, TypeError) as exc:
                raise MemoryStoreError(f"line {number} is not a memory") from exc
            target: Tier = tier or (raw.tier if raw.tier in TIERS else "project")
            key = scope.key(target)
            parsed.append(
                raw.evolve(user=key.user, project=key.project, tier=target, session=key.session,
                           source=raw.source or "import", superseded_by=raw.superseded_by)
            )  # fmt: skip
        vectors = await self.embed([e.content for e in parsed]) if parsed else []
        entries = [e.evolve(embedding=tuple(v)) for e, v in zip(parsed, vectors, strict=True)]
        await self.put(entries)
        return entries

    async def end_session(self, scope: MemoryScope) -> None:
        """Evict the caller's session tier."""
        await self.store.drop_session(scope.key("session"))
