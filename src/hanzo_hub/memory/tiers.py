"""Tiered retrieval: per-tier top-k above a cosine threshold, fused with BM25, re-ranked and cut to a budget.

Each tier contributes its dense top-k whose cosine passes the tier threshold (defaults k = 20/10/5 and 0.3/0.5/0.6
for session/project/global) and, where lexical fusion is on and the tier is small enough, its BM25 top-k. The union
is scored as

    semantic_weight * cosine + lexical_weight * bm25 / best_bm25_of_tier
    + group_weight * group_bm25 / best_group_bm25_of_tier
    + relevance_weight * relevance + recency_weight * 2^(-age / half_life)
    + time_weight * closeness(created_at, the window the query names) + tier weight

where ``group_bm25`` scores the whole conversation the entry came from (its ``source``: every entry remembered in
one session shares one) as a single document, so the turns of a conversation that matches the query as a whole
rise together even when each holds only part of the answer. Its weight is 0 by default: with the query adapter the
development set (``bench/_memory_dev.py``) scored best without it.

Then the query vector is moved towards the best ``feedback_top`` hits and every candidate's semantic part is scored
again with it (pseudo-relevance feedback, :mod:`hanzo_hub.memory.feedback`; ``feedback_weight`` 0 turns it off).

Where a local cross-encoder is configured (``memory.reranker``, :mod:`hanzo_hub.memory.rerank`), the best
``rerank_top`` of the union are scored by it with the query, in a worker thread, and re-ordered by
``score + rerank_weight * cross_encoder_score``; the rest follow in their fused order. The union is then
cut to the token budget (the best result is always kept). Superseded entries are never returned. Every hit
carries its tier, its score parts and a one-line ``why``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio

from hanzo_hub.config import MemorySettings, MemoryTierSettings
from hanzo_hub.memory.feedback import expanded_query, rescored
from hanzo_hub.memory.models import MemoryEntry, Tier
from hanzo_hub.memory.rerank import CrossEncoderReranker
from hanzo_hub.memory.store import ScopeIndex
from hanzo_hub.memory.timeref import TimeWindow, time_window
from hanzo_hub.memory.vector_cache import Vector

DAY = 86400.0
DENSE_OVERFETCH = 2
"""Fetch this many times k from the vector store, so that superseded entries do not starve a tier."""
GROUPS_FETCHED = 20
"""Conversations scored per tier (at least k): the rest get no group bonus."""


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled memory and why it was returned."""

    entry: MemoryEntry
    tier: Tier
    score: float
    semantic: float | None
    lexical: float | None
    group: float | None = None
    rerank: float | None = None
    timed: float | None = None
    expanded: float | None = None

    @property
    def why(self) -> str:
        """A one-line reason: tier and score parts."""
        parts = [f"{self.tier} tier", f"score {self.score:.3f}"]
        if self.semantic is not None:
            parts.append(f"cosine {self.semantic:.3f}")
        if self.expanded is not None:
            parts.append(f"cosine {self.expanded:.3f} with the query moved towards the best hits")
        if self.lexical is not None:
            parts.append(f"bm25 {self.lexical:.2f} of tier best")
        if self.group:
            parts.append(f"conversation bm25 {self.group:.2f} of tier best")
        if self.timed is not None:
            parts.append(f"made in the time the query names {self.timed:.2f}")
        if self.rerank is not None:
            parts.append(f"cross-encoder {self.rerank:.3f}")
        parts.append(f"relevance {self.entry.relevance:.2f}")
        return ", ".join(parts)


def tier_settings(settings: MemorySettings, tier: Tier) -> MemoryTierSettings:
    """The k, threshold and weight of ``tier``."""
    return {"session": settings.session, "project": settings.project, "global": settings.global_}[tier]


class TieredRetriever:
    """Stateless apart from settings, the clock and the optional cross-encoder."""

    def __init__(
        self, settings: MemorySettings, clock: Callable[[], float], reranker: CrossEncoderReranker | None = None
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.reranker = reranker

    def _recency(self, entry: MemoryEntry, now: float) -> float:
        age_days = max(0.0, now - max(entry.accessed_at, entry.created_at)) / DAY
        return float(2.0 ** (-age_days / self.settings.recency_half_life_days))

    async def _tier_hits(
        self, tier: Tier, index: ScopeIndex, query: str, vector: Sequence[float], now: float, window: TimeWindow | None
    ) -> list[RecallHit]:
        s = self.settings
        ts = tier_settings(s, tier)
        if ts.k == 0 or not index.entries:
            return []
        semantic: dict[str, float] = {}
        for rid, cos in await index.vectors.query(vector, ts.k * DENSE_OVERFETCH):
            entry = index.entries.get(rid)
            if entry is not None and entry.superseded_by is None and cos >= ts.threshold:
                semantic[rid] = cos
            if len(semantic) >= ts.k:
                break
        lexical: dict[str, float] = {}
        groups: dict[str, float] = {}
        if s.lexical and len(index.entries) <= s.lexical_max_entries:
            if s.lexical_weight > 0:
                ranked = [(r, v) for r, v in index.lexical.search(query, ts.k * DENSE_OVERFETCH)]
                ranked = [(r, v) for r, v in ranked if index.entries[r].superseded_by is None][: ts.k]
                best = ranked[0][1] if ranked else 1.0
                lexical = {rid: score / best for rid, score in ranked}
            if s.group_weight > 0:
                found = index.lexical.search_groups(query, max(ts.k, GROUPS_FETCHED))
                best = found[0][1] if found else 1.0
                groups = {group: score / best for group, score in found}
        hits = []
        for rid in semantic.keys() | lexical.keys():
            entry = index.entries[rid]
            sem, lex, grp = semantic.get(rid), lexical.get(rid), groups.get(entry.source)
            timed = window.closeness(entry.created_at) if window is not None else None
            score = (
                s.semantic_weight * max(sem or 0.0, 0.0)
                + s.lexical_weight * (lex or 0.0)
                + s.group_weight * (grp or 0.0)
                + s.relevance_weight * entry.relevance
                + s.recency_weight * self._recency(entry, now)
                + s.time_weight * (timed or 0.0)
                + ts.weight
            )
            hits.append(RecallHit(entry, tier, score, sem, lex, grp, timed=timed))
        return hits

    def _with_feedback(
        self, indexes: Mapping[Tier, ScopeIndex], hits: list[RecallHit], vector: Sequence[float]
    ) -> list[RecallHit]:
        """Every hit's semantic part scored again against the query moved towards the best hits (``feedback``),
        with the vectors each scope keeps in process memory."""
        vectors: dict[str, Vector] = {}
        for tier, index in indexes.items():
            vectors.update(index.quantized.get(h.entry.id for h in hits if h.tier == tier))
        best = [vectors[h.entry.id] for h in hits[: self.settings.feedback_top] if h.entry.id in vectors]
        if not best:
            return hits
        query = expanded_query(vector, best, self.settings.feedback_weight)
        return rescored(hits, vectors, query, self.settings.semantic_weight)

    async def _reranked(self, reranker: CrossEncoderReranker, query: str, hits: list[RecallHit]) -> list[RecallHit]:
        top, rest = hits[: self.settings.rerank_top], hits[self.settings.rerank_top :]
        texts = [h.entry.content for h in top]
        scores = await anyio.to_thread.run_sync(reranker.scores, query, texts)
        weight = self.settings.rerank_weight
        top = [
            dataclasses.replace(h, score=h.score + weight * ce, rerank=ce) for h, ce in zip(top, scores, strict=True)
        ]
        top.sort(key=lambda h: (-h.score, h.entry.id))
        return top + rest

    async def recall(
        self,
        indexes: Mapping[Tier, ScopeIndex],
        query: str,
        vector: Sequence[float],
        *,
        token_budget: int | None = None,
        limit: int | None = None,
    ) -> list[RecallHit]:
        """Recall from every tier in ``indexes``, best first, within ``token_budget`` tokens and ``limit`` hits."""
        now = self.clock()
        window = time_window(query, now) if self.settings.time_weight > 0 else None
        hits: list[RecallHit] = []
        for tier, index in indexes.items():
            hits.extend(await self._tier_hits(tier, index, query, vector, now, window))
        hits.sort(key=lambda h: (-h.score, h.entry.id))
        if self.settings.feedback_weight > 0 and hits:
            hits = self._with_feedback(indexes, hits, vector)
        if self.reranker is not None and hits:
            hits = await self._reranked(self.reranker, query, hits)
        budget = token_budget if token_budget is not None else self.settings.token_budget
        kept: list[RecallHit] = []
        used = 0
        for hit in hits:
            if limit is not None and len(kept) >= limit:
                break
            if kept and used + hit.entry.tokens > budget:
                continue
            kept.append(hit)
            used += hit.entry.tokens
        return kept
