from collections.abc import Sequence
from typing import Any

from hanzo_hub.errors import HubError
from hanzo_hub.selection import Candidate, ToolSelector
from hanzo_hub.vectors.fake import HashEmbedder, MemoryVectorStore


async def test_select_without_llm_reports_stage2_skipped(tools: list[dict[str, Any]]) -> None:
    selector = await ToolSelector.build(tools, embedder=HashEmbedder(), store=MemoryVectorStore())
    selection = await selector.select("what is the weather forecast in Paris")
    assert selection.stage2 == "skipped"
    assert selection.tools[0].id == "weather::get_forecast"
    assert selection.tokens == sum(c.tokens for c in selection.tools)
    assert selection.tokens < selection.all_tokens or len(selection.tools) == len(tools)
    assert set(selection.timings_ms) >= {"embed", "search", "stage1", "total"}


async def test_stage2_may_only_drop_and_reorder(tools: list[dict[str, Any]]) -> None:
    selector = await ToolSelector.build(tools, embedder=HashEmbedder())

    async def llm(query: str, candidates: Sequence[Candidate]) -> list[str]:
        return ["invented::tool", candidates[1].id, candidates[0].id, candidates[1].id]

    selection = await selector.select("read a file from disk", stage2=llm)
    assert selection.stage2 == "applied"
    assert [c.id for c in selection.tools] == [selection.candidates[1].id, selection.candidates[0].id]


async def test_failing_stage2_keeps_stage1_order(tools: list[dict[str, Any]]) -> None:
    selector = await ToolSelector.build(tools)

    async def llm(query: str, candidates: Sequence[Candidate]) -> list[str]:
        raise HubError("provider down")

    selection = await selector.select("read a file", stage2=llm)
    assert selection.stage2 == "failed"
    assert [c.id for c in selection.tools] == [c.id for c in selection.candidates]


async def test_core_tools_always_included_and_limits_hold(tools: list[dict[str, Any]]) -> None:
    selector = await ToolSelector.build(
        tools, embedder=HashEmbedder(), core_tools=["search::web_search"], max_tools=2, token_budget=10_000
    )
    selection = await selector.select("weather forecast")
    assert selection.tools[0].id == "search::web_search"
    assert selection.tools[0].core
    assert len(selection.tools) == 2


async def test_queries_take_the_embedders_query_path(tools: list[dict[str, Any]]) -> None:
    """Tool texts go through ``embed``; the query and its sub-queries through ``embed_queries`` where it exists."""

    class QueryPathEmbedder(HashEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.query_calls: list[list[str]] = []

        async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
            self.query_calls.append(list(texts))
            return self.embed_sync(texts)

    embedder = QueryPathEmbedder()
    selector = await ToolSelector.build(tools, embedder=embedder)
    assert embedder.query_calls == []
    query = "what is the weather forecast in Paris, then read a file from disk"
    selection = await selector.select(query)
    assert embedder.query_calls == [selector.query_texts(query)]
    assert len(embedder.query_calls[0]) == 3  # the query and its two clauses
    assert {"weather::get_forecast"} <= {c.id for c in selection.tools}
