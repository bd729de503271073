from typing import Any

import numpy as np

from hanzo_hub.selection.budget import BpeCounter, HeuristicCounter, default_counter, fit_budget
from hanzo_hub.selection.dense import DenseIndex
from hanzo_hub.selection.hybrid import FusionParams, HybridRetriever
from hanzo_hub.selection.lexical import BM25Index
from hanzo_hub.selection.text import tool_text
from hanzo_hub.vectors.fake import HashEmbedder


def test_bm25_ranks_the_tool_sharing_rare_terms_first(tools: list[dict[str, Any]]) -> None:
    index = BM25Index([tool_text(t) for t in tools])
    assert index.search("weather forecast for Paris", 1)[0][0] == 0
    assert index.search("zzz unknown", 3) == []


def test_hybrid_fuses_lexical_and_dense_and_adds_subquery_hits(tools: list[dict[str, Any]]) -> None:
    texts = [tool_text(t) for t in tools]
    embedder = HashEmbedder()
    dense = DenseIndex.from_vectors([str(i) for i in range(len(tools))], embedder.embed_sync(texts), 256)
    retriever = HybridRetriever(
        BM25Index(texts),
        dense,
        [t["server"] for t in tools],
        lambda qs: np.asarray(embedder.embed_sync(qs), dtype=np.float32),
        FusionParams(),
    )
    ranked = retriever.retrieve("Write the summary to a file, then convert the document to PDF", 3)
    assert {3, 4} <= set(ranked.indices)
    assert ranked.scores == sorted(ranked.scores, reverse=True)


def test_bpe_counter_counts_o200k_tokens_offline() -> None:
    counter = BpeCounter()
    assert counter.count("hello world") == 2
    assert default_counter().name == "bpe-openai:o200k_base"
    assert HeuristicCounter().count("x" * 25) == 10


def test_fit_budget_keeps_reserved_then_rank_order_within_limits() -> None:
    result = fit_budget([100, 3000, 900, 200, 50], budget=1200, max_tools=3, reserved=[4])
    assert result.kept == [4, 0, 2]
    assert result.tokens == 1050
    assert result.dropped == [1, 3]
