"""Stage 2 against a real OpenAI-compatible server on loopback: keep, reorder, ignore invented ids, fail soft."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hanzo_hub.selection import ToolSelector
from hanzo_hub.selection.llm_filter import FilterFailed, LlmFilter, build_prompt, parse_answer
from tests.selection.openai_loopback import LoopbackOpenAI, OpenAICompatCompleter, serve_loopback

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def loopback() -> Iterator[tuple[str, LoopbackOpenAI]]:
    with serve_loopback() as served:
        yield served


async def test_filter_keeps_reorders_and_ignores_invented_ids(
    tools: list[dict[str, Any]], loopback: tuple[str, LoopbackOpenAI]
) -> None:
    url, server = loopback
    selector = await ToolSelector.build(tools, top_n=6)
    stage2 = LlmFilter(OpenAICompatCompleter(url, "keyword"))
    selection = await selector.select("weather forecast and alerts for Ohio", stage2=stage2)
    assert selection.stage2 == "applied"
    ids = [c.id for c in selection.tools]
    # the model kept the two weather tools (their lines share words with the request), reversed, plus "t999"
    assert set(ids) == {"weather::get_forecast", "weather::get_alerts"}
    stage1 = [c.id for c in selection.candidates if c.id in ids]
    assert ids == list(reversed(stage1))
    assert "weather forecast and alerts for Ohio" in server.requests[-1]["messages"][-1]["content"]
    assert "stage2" in selection.timings_ms


@pytest.mark.parametrize(
    ("model", "reason"), [("prose", "no JSON list"), ("broken", "HTTP 500"), ("slow", "no answer within")]
)
async def test_failures_keep_stage1_and_say_why(
    tools: list[dict[str, Any]], loopback: tuple[str, LoopbackOpenAI], model: str, reason: str
) -> None:
    url, _ = loopback
    selector = await ToolSelector.build(tools, top_n=6)
    stage2 = LlmFilter(OpenAICompatCompleter(url, model), timeout=1.0 if model == "slow" else 15.0)
    selection = await selector.select("read a file from disk", stage2=stage2)
    assert selection.stage2 == "failed"
    assert reason in selection.stage2_note
    assert [c.id for c in selection.tools] == [c.id for c in selection.candidates][: len(selection.tools)]


async def test_no_filter_is_reported_as_skipped(tools: list[dict[str, Any]]) -> None:
    selection = await (await ToolSelector.build(tools)).select("read a file")
    assert selection.stage2 == "skipped"


async def test_prompt_and_parsing(tools: list[dict[str, Any]]) -> None:
    selector = await ToolSelector.build(tools, top_n=3)
    candidates = selector.stage1("write text to a file")
    prompt = build_prompt("write text to a file", candidates)
    assert prompt.splitlines()[0] == "Request: write text to a file"
    assert "t1: " in prompt
    assert "t4: " not in prompt
    assert parse_answer('ok ["t2", "t1", "t2", "nope"]', candidates) == [candidates[1].id, candidates[0].id]
    assert parse_answer(f'["{candidates[2].tool["name"]}"]', candidates) == [candidates[2].id]
    with pytest.raises(FilterFailed):
        parse_answer('["t9"]', candidates)
    with pytest.raises(FilterFailed):
        parse_answer("no list here", candidates)
