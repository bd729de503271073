"""The selection pipeline: stage 1 hybrid top-N, an optional stage-2 filter, core tools, and the final budget.

Input is a list of tool dicts (``name``, ``description``, ``inputSchema``, ``server``, optional ``category``,
``server_description``, ``tool_id``); output is a ``Selection`` of at most ``max_tools`` tools whose definitions fit
``token_budget`` tokens. Stage 2 is any async callable that gets the query and the candidates and returns candidate
ids: it may only drop or reorder (ids it invents are ignored). Without one, or when it fails, stage 2 is skipped and
the ``Selection`` says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from hanzo_hub.errors import HubError
from hanzo_hub.selection.budget import (
    DEFAULT_TOKEN_BUDGET,
    MAX_TOOLS,
    TokenCounter,
    default_counter,
    definition_tokens,
    fit_budget,
)
from hanzo_hub.selection.dense import DenseIndex, Matrix, SyncStats, sync_index
from hanzo_hub.selection.hybrid import FusionParams, HybridRetriever
from hanzo_hub.selection.lexical import BM25Index
from hanzo_hub.selection.query import subqueries
from hanzo_hub.selection.text import TextOptions, tool_id, tool_text
from hanzo_hub.vectors.base import Embedder, VectorStore, embed_queries

logger = logging.getLogger(__name__)

STAGE1_TOP_N = 20
FILTER_TOP_N = 40
"""Stage-1 candidates an LLM filter reads by default. Within the top 20 lie at most 0.966 of our held-out catalog
queries' gold tools and 0.910 of MCPToolBench++'s; within the top 40, 0.982 and 0.983 (``bench/results``): the
ceiling of any filter, which may only drop or reorder. Twice the prompt (one line per candidate)."""
DEFAULT_FUSION = FusionParams()
DEFAULT_TEXT = TextOptions()

Stage2Status = Literal["applied", "skipped", "failed"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One ranked tool: its id, fused stage-1 score, definition tokens and the tool dict itself."""

    id: str
    score: float
    tokens: int
    tool: Mapping[str, Any]
    core: bool = False


Stage2Filter = Callable[[str, Sequence[Candidate]], Awaitable[Sequence[str]]]


@dataclass(frozen=True, slots=True)
class Selection:
    """The result of one selection, with what each stage did and what it cost."""

    query: str
    tools: list[Candidate]
    tokens: int
    all_tokens: int
    candidates: list[Candidate]
    stage2: Stage2Status
    stage2_note: str
    timings_ms: dict[str, float] = field(default_factory=dict)
    query_adapter: bool = False
    """Whether the query vectors were mapped by a query adapter before the dense search."""


class ToolSelector:
    """Indexes a tool list once and answers queries; build with ``await ToolSelector.build(...)``."""

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]],
        retriever: HybridRetriever,
        embedder: Embedder | None,
        *,
        counter: TokenCounter,
        core_tools: Sequence[str] = (),
        top_n: int = STAGE1_TOP_N,
        max_tools: int = MAX_TOOLS,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
    ) -> None:
        self.tools = list(tools)
        self.ids = [tool_id(t) for t in self.tools]
        self.retriever = retriever
        self.embedder = embedder
        self.counter = counter
        self.tokens = [definition_tokens(t, counter) for t in self.tools]
        self.all_tokens = sum(self.tokens)
        position = {tid: i for i, tid in enumerate(self.ids)}
        self.core = [position[c] for c in core_tools if c in position]
        self.top_n = top_n
        self.max_tools = max_tools
        self.token_budget = token_budget
        self.sync_stats: SyncStats | None = None

    @classmethod
    async def build(
        cls,
        tools: Sequence[Mapping[str, Any]],
        *,
        embedder: Embedder | None = None,
        store: VectorStore | None = None,
        params: FusionParams = DEFAULT_FUSION,
        text_options: TextOptions = DEFAULT_TEXT,
        counter: TokenCounter | None = None,
        seeds: Mapping[str, Any] | None = None,
        query_adapter: Callable[[Matrix], Matrix] | None = None,
        **kwargs: Any,
    ) -> ToolSelector:
        """Index ``tools``: BM25 always; dense when an embedder is given (persisted in ``store`` when given;
        ``seeds`` are precomputed vectors by content hash that the store sync uses instead of embedding;
        ``query_adapter`` maps query vectors before the dense search, see :mod:`hanzo_hub.selection.adapter`).

        Raises:
            EmbeddingError: the embedder failed.
            VectorStoreError: the store failed.
        """
        ids = [tool_id(t) for t in tools]
        texts = [tool_text(t, text_options) for t in tools]
        dense: DenseIndex | None = None
        stats: SyncStats | None = None
        if embedder is not None and tools:
            if store is not None:
                metas = [{"server": str(t.get("server", "")), "name": str(t.get("name", ""))} for t in tools]
                dense, stats = await sync_index(ids, texts, embedder, store, metadata=metas, seeds=seeds)
            else:
                dense = DenseIndex.from_vectors(ids, await embedder.embed(texts), embedder.dimension)
        embed = _matrix_embed(embedder) if embedder is not None else None
        servers = [str(t.get("server", "")) for t in tools]
        retriever = HybridRetriever(BM25Index(texts), dense, servers, embed, params, query_adapter)
        selector = cls(tools, retriever, embedder, counter=counter or default_counter(), **kwargs)
        selector.sync_stats = stats
        return selector

    def query_texts(self, query: str) -> list[str]:
        """The query and the sub-queries stage 1 searches."""
        return [query, *(subqueries(query) if self.retriever.params.decompose else [])]

    def stage1(
        self,
        query: str,
        n: int | None = None,
        query_vectors: Matrix | None = None,
        allowed: Callable[[str], bool] | None = None,
    ) -> list[Candidate]:
        """Rank tools for ``query`` on the calling thread; ``query_vectors`` (from ``query_texts``) skips embedding.

        ``allowed`` (a profile) keeps only the tools it accepts: the whole index is ranked, then filtered.
        """
        n = n or self.top_n
        ranked = self.retriever.retrieve(query, n if allowed is None else len(self.ids), query_vectors)
        out = [
            Candidate(self.ids[i], score, self.tokens[i], self.tools[i])
            for i, score in zip(ranked.indices, ranked.scores, strict=True)
            if allowed is None or allowed(self.ids[i])
        ]
        return out[:n]

    async def select(
        self,
        query: str,
        *,
        stage2: Stage2Filter | None = None,
        allowed: Callable[[str], bool] | None = None,
        candidates: int | None = None,
    ) -> Selection:
        """Select the tools for ``query``: stage 1, optional stage 2, core tools, then the count and token budget.

        Stage 1 ranks ``candidates`` tools; unset, ``FILTER_TOP_N`` when ``stage2`` reads them, else ``top_n``, and
        never fewer than ``max_tools``."""
        timings: dict[str, float] = {}
        start = time.perf_counter()
        vectors = None
        if self.embedder is not None and self.retriever.dense is not None:
            vectors = np.asarray(await embed_queries(self.embedder, self.query_texts(query)), dtype=np.float32)
            timings["embed"] = (time.perf_counter() - start) * 1000
        search_start = time.perf_counter()
        depth = candidates or max(FILTER_TOP_N if stage2 is not None else self.top_n, self.max_tools)
        ranked = self.stage1(query, depth, query_vectors=vectors, allowed=allowed)
        timings["search"] = (time.perf_counter() - search_start) * 1000
        timings["stage1"] = (time.perf_counter() - start) * 1000
        ordered, status, note = await self._stage2(query, ranked, stage2, timings)
        return self._finish(query, ranked, ordered, status, note, timings, start, allowed)

    async def _stage2(
        self, query: str, candidates: list[Candidate], stage2: Stage2Filter | None, timings: dict[str, float]
    ) -> tuple[list[Candidate], Stage2Status, str]:
        if stage2 is None:
            return candidates, "skipped", "no LLM filter configured; stage-1 order kept"
        start = time.perf_counter()
        try:
            chosen = await stage2(query, candidates)
        except HubError as exc:
            logger.warning("stage-2 filter failed (%s: %s); keeping stage-1 order", type(exc).__name__, exc)
            return candidates, "failed", f"LLM filter failed ({type(exc).__name__}: {exc}); stage-1 order kept"
        finally:
            timings["stage2"] = (time.perf_counter() - start) * 1000
        by_id = {c.id: c for c in candidates}
        kept = [by_id[i] for i in dict.fromkeys(chosen) if i in by_id]  # only drop or reorder, never add
        return kept, "applied", f"LLM filter kept {len(kept)} of {len(candidates)}"

    def apply_budget(
        self, ordered: Sequence[Candidate], allowed: Callable[[str], bool] | None = None
    ) -> list[Candidate]:
        """Core tools first, then ``ordered``, cut to ``max_tools`` tools and ``token_budget`` tokens."""
        core = [
            Candidate(self.ids[i], 0.0, self.tokens[i], self.tools[i], core=True)
            for i in self.core
            if allowed is None or allowed(self.ids[i])
        ]
        core_ids = {c.id for c in core}
        merged = core + [c for c in ordered if c.id not in core_ids]
        fit = fit_budget(
            [c.tokens for c in merged],
            budget=self.token_budget,
            max_tools=self.max_tools,
            reserved=range(len(core)),
        )
        return [merged[i] for i in fit.kept]

    def _finish(
        self,
        query: str,
        candidates: list[Candidate],
        ordered: list[Candidate],
        status: Stage2Status,
        note: str,
        timings: dict[str, float],
        start: float,
        allowed: Callable[[str], bool] | None = None,
    ) -> Selection:
        final = self.apply_budget(ordered, allowed)
        timings["total"] = (time.perf_counter() - start) * 1000
        return Selection(
            query=query,
            tools=final,
            tokens=sum(c.tokens for c in final),
            all_tokens=self.all_tokens,
            candidates=candidates,
            stage2=status,
            stage2_note=note,
            timings_ms=timings,
            query_adapter=self.retriever.query_adapter is not None and self.retriever.dense is not None,
        )


def _matrix_embed(embedder: Embedder) -> Callable[[Sequence[str]], Matrix]:
    def embed(texts: Sequence[str]) -> Matrix:
        return np.asarray(embedder.embed_sync(texts), dtype=np.float32)

    return embed
