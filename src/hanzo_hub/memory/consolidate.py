"""Consolidation, on demand or as a scheduled background job.

Steps, each with a threshold from ``MemorySettings``:
1. **Merge near-duplicates** (cosine > ``duplicate_cosine``) within a scope: the newer entry wins, the older is kept
   with ``superseded_by`` set (recall skips it, listings and exports still show it), never silently deleted.
2. **Promote** session memories read more than ``promote_accesses`` times into project memory.
3. **Generalize** clusters of at least ``cluster_min_size`` project memories (cosine >= ``cluster_cosine``) into one
   global entry, through the LLM hook; without one the step is skipped and the report says so.
4. **Retention** (``decay.py``): decay idle relevance, delete what has been idle past ``delete_after_days``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import numpy as np

from hanzo_hub.memory.decay import plan_retention
from hanzo_hub.memory.models import MemoryEntry, MemoryScope, new_id
from hanzo_hub.memory.service import MemoryService
from hanzo_hub.memory.store import ScopeIndex

logger = logging.getLogger(__name__)


class Generalizer(Protocol):
    """An LLM hook: one general statement for a cluster of ``scope``'s related memories; ``None`` when no LLM
    answered (the cluster is left as it is)."""

    @property
    def available(self) -> bool:
        """Whether an LLM can answer now (else the step is skipped, and the report says so)."""
        ...

    async def __call__(self, texts: Sequence[str], scope: MemoryScope) -> str | None: ...


@dataclass(slots=True)
class ConsolidationReport:
    """What a run did, per step."""

    superseded: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)
    generalized: list[str] = field(default_factory=list)
    decayed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def near_duplicates(entries: Sequence[MemoryEntry], threshold: float) -> list[tuple[MemoryEntry, MemoryEntry]]:
    """``(older, newer)`` pairs above ``threshold``; each older entry is paired with its newest duplicate."""
    live = [e for e in entries if e.superseded_by is None and e.embedding]
    if len(live) < 2:
        return []
    live.sort(key=lambda e: (e.created_at, e.id))
    matrix = np.asarray([e.embedding for e in live], dtype=np.float32)
    sims = matrix @ matrix.T
    pairs = []
    for i in range(len(live)):
        later = np.nonzero(sims[i, i + 1 :] > threshold)[0]
        if later.size:
            pairs.append((live[i], live[i + 1 + int(later[-1])]))
    return pairs


def clusters(entries: Sequence[MemoryEntry], threshold: float, min_size: int) -> list[list[MemoryEntry]]:
    """Greedy clusters: each seed (oldest first) takes every unclaimed entry within ``threshold``."""
    live = [e for e in entries if e.superseded_by is None and e.embedding and "generalized" not in e.tags]
    if len(live) < min_size:
        return []
    matrix = np.asarray([e.embedding for e in live], dtype=np.float32)
    sims = matrix @ matrix.T
    claimed: set[int] = set()
    found = []
    for i in range(len(live)):
        if i in claimed:
            continue
        members = [j for j in np.nonzero(sims[i] >= threshold)[0].tolist() if j not in claimed]
        if len(members) >= min_size:
            claimed.update(members)
            found.append([live[j] for j in members])
    return found


class Consolidator:
    """Runs the consolidation steps over every opened scope, or one caller's scopes."""

    def __init__(
        self, service: MemoryService, generalizer: Generalizer | None = None, *, expiring: str | None = None
    ) -> None:
        self.service = service
        self.generalizer = generalizer
        self.expiring = expiring
        """Sessions whose id starts with this have no end but idleness: a run over every scope ends those idle
        past ``session_idle_timeout`` (``None``: none)."""

    async def run(self, scope: MemoryScope | None = None) -> ConsolidationReport:
        """One consolidation pass over ``scope``'s tiers, or over every opened scope when None."""
        report = ConsolidationReport()
        if scope is not None:
            indexes = list((await self.service.indexes(scope)).values())
        else:
            await self._expire_idle_sessions(report)
            indexes = self.service.store.opened()
        for index in indexes:
            await self._scope(index, report)
        if not self._generalizing:
            report.skipped.append("generalize: no LLM configured")
        return report

    @property
    def _generalizing(self) -> bool:
        return self.generalizer is not None and self.generalizer.available

    async def _expire_idle_sessions(self, report: ConsolidationReport) -> None:
        timeout = self.service.settings.session_idle_timeout
        if self.expiring is None or timeout <= 0:
            return
        now = self.service.clock()
        for session in self.service.store.session_ids():
            if not session.startswith(self.expiring):
                continue
            scopes = self.service.store.sessions_of(session)
            written = (max(e.accessed_at, e.created_at) for i in scopes for e in i.entries.values())
            last = max(max(written, default=0.0), self.service.store.session_last_used(session))
            if now - last >= timeout:
                await self.end_session(session, report)

    async def end_session(self, session: str, report: ConsolidationReport | None = None) -> ConsolidationReport:
        """Client session ``session`` ended: promote its often-read memories (as a run would), then evict its
        session tier from memory."""
        report = report if report is not None else ConsolidationReport()
        for index in self.service.store.sessions_of(session):
            try:
                await self._promote(index, await index.with_embeddings(), report)
            finally:
                await self.service.store.drop_session(index.key)
        return report

    async def _scope(self, index: ScopeIndex, report: ConsolidationReport) -> None:
        s = self.service.settings
        entries = await index.with_embeddings()
        pairs = near_duplicates(entries, s.duplicate_cosine)
        if pairs:
            superseded = [old.evolve(superseded_by=new.id) for old, new in pairs]
            await self.service.put(superseded)
            report.superseded.extend(e.id for e in superseded)
        if index.key.tier == "session":
            await self._promote(index, entries, report)
        elif index.key.tier == "project" and self._generalizing:
            await self._generalize(index, await index.with_embeddings(), report)
        plan = plan_retention(await index.with_embeddings(), self.service.clock(), s)
        if plan.decayed:
            await self.service.put(plan.decayed)
            report.decayed.extend(e.id for e in plan.decayed)
        if plan.expired:
            report.deleted.extend(await index.delete(plan.expired))

    async def _promote(self, index: ScopeIndex, entries: list[MemoryEntry], report: ConsolidationReport) -> None:
        s = self.service.settings
        key = index.key
        chosen = [
            e for e in entries
            if index.entries.get(e.id) is not None and index.entries[e.id].access_count > s.promote_accesses
        ]  # fmt: skip
        if not chosen:
            return
        promoted = [
            e.evolve(id=new_id(), tier="project", session="", source=f"promoted:{e.source}",
                     access_count=index.entries[e.id].access_count, accessed_at=index.entries[e.id].accessed_at)
            for e in chosen
        ]  # fmt: skip
        await self.service.put(promoted)
        await index.delete([e.id for e in chosen])
        report.promoted.extend(e.id for e in promoted)
        logger.info("promoted %d session memories of a scope to project memory", len(promoted))
        del key

    async def _generalize(self, index: ScopeIndex, entries: list[MemoryEntry], report: ConsolidationReport) -> None:
        assert self.generalizer is not None
        s = self.service.settings
        key = index.key
        scope = MemoryScope(key.user, key.project)
        for cluster in clusters(entries, s.cluster_cosine, s.cluster_min_size):
            text = await self.generalizer([e.content for e in cluster], scope)
            if not text:
                if "generalize: no LLM answered" not in report.skipped:
                    report.skipped.append("generalize: no LLM answered")
                continue
            (entry,) = await self.service.remember(
                scope, [text], tier="global", source=f"generalized:{key.project}", tags=("generalized",)
            )
            tagged = [e.evolve(tags=(*e.tags, "generalized")) for e in cluster]
            await self.service.put(tagged)
            report.generalized.append(entry.id)


@contextlib.asynccontextmanager
async def run_periodically(consolidator: Consolidator, every: float) -> AsyncIterator[None]:
    """Run ``consolidator`` every ``every`` seconds in a task group owned by this context."""

    async def loop() -> None:
        while True:
            await anyio.sleep(every)
            try:
                await consolidator.run()
            except Exception:  # task boundary: one failed pass must not end the schedule
                logger.exception("memory consolidation failed")

    async with anyio.create_task_group() as tg:
        tg.start_soon(loop)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()
