"""Stage 1: lexical + dense retrieval fused by weighted reciprocal rank, over the query and its sub-queries.

Every ranked list (BM25 and dense, for the whole query and for each sub-query) adds ``w / (k + rank)`` to a tool.
Tools then get a server-level bonus: servers are ranked by the fused scores of their best tools, and each tool of
the top servers gains ``server_weight / (k + server rank)``. This is tool-to-server retrieval folded into one score:
a task that needs several tools of one server pulls the siblings of the tool that matched best.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hanzo_hub.selection.dense import DenseIndex, Matrix
from hanzo_hub.selection.lexical import BM25Index
from hanzo_hub.selection.query import subqueries

Scores = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FusionParams:
    """Weights of the fusion.

    Defaults come from a 48-point grid (dense weight 1/1.5/2, RRF k 20/60, round-robin on/off, name repeat 1/2,
    server bonus 0/0.3) scored on the tuning half of our own catalog query set only (``bench/queries``); the
    held-out half and the public sets are reported apart in ``bench/results/tool_selection.md``. ``interleave``
    was chosen again once the query adapter shipped, on the same half: the plain fused order won there.
    """

    rrf_k: float = 20.0
    dense_weight: float = 1.5
    lexical_weight: float = 1.0
    subquery_weight: float = 0.5
    server_weight: float = 0.0
    server_top: int = 5
    server_tools: int = 3
    depth: int = 100
    decompose: bool = True
    interleave: bool = False
    """Round-robin the whole query's fused ranking with each sub-query's own, so every sub-need gets top slots. Off:
    on the tuning half, with the query adapter, it lost all-gold@15 (0.978 to 0.971; without the adapter 0.953 to
    0.946), the sub-queries' scores in the fused sum already giving each sub-need its place."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """Tool positions in the index, best first, with their fused scores."""

    indices: list[int]
    scores: list[float]


def _rank_dense(row: Matrix, depth: int) -> Sequence[int]:
    depth = min(depth, row.shape[0])
    top = np.argpartition(-row, depth - 1)[:depth]
    return top[np.argsort(-row[top], kind="stable")].tolist()  # type: ignore[no-any-return]


def _rank_lexical(index: BM25Index, query: str, depth: int) -> Sequence[int]:
    return [doc for doc, _ in index.search(query, depth)]


def _top(scores: Scores, k: int, *, positive: bool = False) -> list[int]:
    depth = min(k, scores.shape[0])
    if depth <= 0:
        return []
    top = np.argpartition(-scores, depth - 1)[:depth]
    ranked = [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]
    return [i for i in ranked if scores[i] > 0] if positive else ranked


def _round_robin(rankings: Sequence[Sequence[int]], k: int) -> list[int]:
    """Take the best unseen item of each ranking in turn until ``k`` items (or the rankings run out)."""
    out: dict[int, None] = {}
    cursors = [0] * len(rankings)
    while len(out) < k and any(c < len(r) for c, r in zip(cursors, rankings, strict=True)):
        for j, ranking in enumerate(rankings):
            while cursors[j] < len(ranking) and ranking[cursors[j]] in out:
                cursors[j] += 1
            if cursors[j] < len(ranking) and len(out) < k:
                out[ranking[cursors[j]]] = None
                cursors[j] += 1
    return list(out)


class HybridRetriever:
    """Fuses BM25 and dense rankings; ``embed`` turns query texts into a matrix of unit rows."""

    def __init__(
        self,
        lexical: BM25Index | None,
        dense: DenseIndex | None,
        servers: Sequence[str],
        embed: Callable[[Sequence[str]], Matrix] | None,
        params: FusionParams = FusionParams(),
        query_adapter: Callable[[Matrix], Matrix] | None = None,
    ) -> None:
        self.lexical = lexical
        self.dense = dense
        self.embed = embed
        self.params = params
        self.query_adapter = query_adapter
        """Maps query vectors (embedded here or passed in) before the dense search; tool vectors stay as stored."""
        self.servers = list(servers)
        names = sorted(set(self.servers))
        self._server_of = np.array([names.index(s) for s in self.servers], dtype=np.int64) if names else None
        self._server_names = names
        self._members: list[list[int]] = [[] for _ in names]
        for i, s in enumerate(self.servers):
            self._members[names.index(s)].append(i)

    def _fuse(self, scores: Scores, ranking: Sequence[int], weight: float) -> None:
        k = self.params.rrf_k
        for rank, idx in enumerate(ranking):
            scores[idx] += weight / (k + rank + 1)

    def retrieve(self, query: str, k: int, query_vectors: Matrix | None = None) -> Ranked:
        """Return the top ``k`` tools for ``query``; ``query_vectors`` skips embedding (rows: query, sub-queries)."""
        p = self.params
        texts = [query, *(subqueries(query) if p.decompose else [])]
        per_text = self._per_text(texts, query_vectors)
        weights = [1.0] + [p.subquery_weight] * (len(texts) - 1)
        fused = np.zeros(len(self.servers), dtype=np.float64)
        for scores, w in zip(per_text, weights, strict=True):
            fused += w * scores
        if p.server_weight > 0 and self._server_of is not None:
            fused = fused + self._server_bonus(fused)
        order = _top(fused, k)
        if p.interleave and len(per_text) > 1:
            order = _round_robin([order, *(_top(s, k, positive=True) for s in per_text[1:])], k)
        return Ranked([int(i) for i in order], [float(fused[i]) for i in order])

    def _per_text(self, texts: Sequence[str], query_vectors: Matrix | None) -> list[Scores]:
        """For each text, its RRF scores over the dense and the lexical ranking."""
        p = self.params
        n = len(self.servers)
        out = [np.zeros(n, dtype=np.float64) for _ in texts]
        if self.dense is not None and p.dense_weight > 0 and (self.embed is not None or query_vectors is not None):
            vectors = (query_vectors if query_vectors is not None else self.embed(texts))[: len(texts)]  # type: ignore[misc]
            if self.query_adapter is not None:
                vectors = self.query_adapter(vectors)
            sims = self.dense.scores(vectors)
            for row, acc in zip(sims, out, strict=False):
                self._fuse(acc, _rank_dense(row, p.depth), p.dense_weight)
        if self.lexical is not None and p.lexical_weight > 0:
            for text, acc in zip(texts, out, strict=True):
                self._fuse(acc, _rank_lexical(self.lexical, text, p.depth), p.lexical_weight)
        return out

    def _server_bonus(self, fused: Scores) -> Scores:
        p = self.params
        server_scores = np.zeros(len(self._server_names), dtype=np.float64)
        for s, members in enumerate(self._members):
            best = np.sort(fused[members])[::-1][: p.server_tools]
            server_scores[s] = float(best.sum())
        bonus = np.zeros_like(fused)
        for rank, s in enumerate(np.argsort(-server_scores)[: p.server_top]):
            if server_scores[s] <= 0:
                break
            bonus[self._members[int(s)]] = p.server_weight / (p.rrf_k + rank + 1)
        return bonus

    def query_texts(self, query: str) -> list[str]:
        """The texts embedded for ``query``: the query itself, then its sub-queries."""
        return [query, *(subqueries((self.params.decompose and query) or "") if self.params.decompose else [])]
