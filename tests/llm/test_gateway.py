"""The gateway against the loopback provider server: retries, failover, cooldown, timeouts, budgets, cost, logs."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import anyio
import pytest

from hanzo_hub.config.llm import BudgetSettings, BudgetSpec, RateLimitSettings, RateLimitSpec
from hanzo_hub.errors import BudgetExceeded, ModelNotFound, NoEligibleModel, ProviderError, RateLimited
from hanzo_hub.llm.gateway import THREADED_COUNT_CHARS
from hanzo_hub.llm.tokens import BpeCounter, count_completion, count_prompt
from hanzo_hub.llm.types import ChatMessage, ChatRequest, Completer, StreamEvent, ToolSpec, Usage
from hanzo_hub.llm.usage import cost_of
from tests.llm.gateway_kit import KEYS, MODELS, USER, FakeTime, ask, make_gateway
from tests.llm.providers_server import Answer, BadJson, Fail, Hang, ProviderServer, StreamCut, StreamError


def log_lines(home: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (home / "logs" / "llm.jsonl").read_text().splitlines()]


async def test_answer_is_priced_to_the_cent_and_recorded(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.script("a", Answer("hello", usage=(1234, 567)))
    async with make_gateway(provider_server, tmp_path) as gw:
        result = await gw.chat(ask(model="m-a"), caller=USER)
        assert gw.ledger is not None
        # 1234 * $2.5/M + 567 * $10/M = $0.003085 + $0.00567
        assert gw.ledger.spent("user:alice") == Decimal("0.008755")
        assert gw.ledger.spent("project:apollo", "month") == Decimal("0.008755")
    assert result.message.text() == "hello"
    assert (result.model, result.provider, result.attempts) == ("m-a", "pa", 1)
    assert result.cost_usd == 0.008755
    [req] = provider_server.requests("a")
    assert req.headers["authorization"] == f"Bearer {KEYS['pa']}"
    assert req.body["model"] == "upstream-a"
    [record] = [json.loads(line) for line in (tmp_path / "llm" / "usage.jsonl").read_text().splitlines()]
    assert record["cost_usd"] == "0.008755"
    assert (record["user"], record["project"], record["input_tokens"]) == ("alice", "apollo", 1234)


async def test_gateway_is_a_completer(provider_server: ProviderServer, tmp_path: Path) -> None:
    async with make_gateway(provider_server, tmp_path) as gw:
        completer: Completer = gw
        result = await completer.chat(ask(model="c-a"), caller=USER)
        events = await collect(completer.stream(ask(model="c-a"), caller=USER))
    assert result.message.text() == "ok"
    assert events[-1].result is not None
    assert events[-1].result.message == result.message


async def test_429_is_retried_after_the_wait_the_provider_asked_for(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    fake = FakeTime()
    provider_server.script("a", Fail(429, retry_after=0.5), Answer("ok"))
    async with make_gateway(provider_server, tmp_path, fake=fake) as gw:
        result = await gw.chat(ask(model="m-a"), caller=USER)
    assert result.attempts == 2
    assert fake.waits == [0.5]  # Retry-After (0.5 s) is longer than the first backoff (<= 0.04 s)
    assert len(provider_server.requests("a")) == 2


async def test_server_errors_back_off_exponentially_then_fail_over(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    fake = FakeTime()
    provider_server.script("a", Fail(500), Fail(502), Fail(503))
    provider_server.script("b", Answer("from b", usage=(100, 10)))
    async with make_gateway(provider_server, tmp_path, fake=fake, fallbacks={"m-a": ["m-b"]}) as gw:
        result = await gw.chat(ask(model="m-a"), caller=USER)
    assert (result.model, result.provider, result.attempts) == ("m-b", "pb", 4)
    assert "failover" in result.reason
    first, second = fake.waits
    assert 0.02 <= first <= 0.04
    assert 0.04 <= second <= 0.08
    assert result.cost_usd == float(Decimal("0.000021"))  # 100 * 0.15/M + 10 * 0.6/M
    assert provider_server.requests("b")[0].headers["x-extra"] == "1"


async def test_failed_deployment_cools_down_and_comes_back(provider_server: ProviderServer, tmp_path: Path) -> None:
    fake = FakeTime()
    provider_server.script("a", Fail(500))
    async with make_gateway(
        provider_server, tmp_path, fake=fake, retries=0, cooldown=30, fallbacks={"m-a": ["m-b"]}
    ) as gw:
        assert (await gw.chat(ask(model="m-a"), caller=USER)).model == "m-b"
        assert (await gw.chat(ask(model="m-a"), caller=USER)).model == "m-b"
        assert len(provider_server.requests("a")) == 1  # skipped while cooling down
        fake.now += 31
        assert (await gw.chat(ask(model="m-a"), caller=USER)).model == "m-a"
    entries = log_lines(tmp_path)
    assert {"provider": "pa", "model": "m-a", "outcome": "cooldown"} in entries[1]["attempts"]  # type: ignore[operator]


async def test_a_cooling_deployment_is_still_tried_when_it_is_the_only_one(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    provider_server.script("a", Fail(500))
    async with make_gateway(provider_server, tmp_path, retries=0) as gw:
        with pytest.raises(ProviderError):
            await gw.chat(ask(model="m-a"), caller=USER)
        assert (await gw.chat(ask(model="m-a"), caller=USER)).message.text() == "ok"


async def test_long_retry_after_fails_over_at_once_and_cools_for_that_long(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    fake = FakeTime()
    provider_server.script("a", Fail(429, retry_after=120))
    async with make_gateway(provider_server, tmp_path, fake=fake, cooldown=1, fallbacks={"m-a": ["m-b"]}) as gw:
        assert (await gw.chat(ask(model="m-a"), caller=USER)).model == "m-b"
        assert fake.waits == []
        assert gw.cooldowns.remaining("pa/m-a") == 120
        fake.now += 60
        assert (await gw.chat(ask(model="m-a"), caller=USER)).model == "m-b"
    assert len(provider_server.requests("a")) == 1


async def test_hanging_provider_times_out_and_fails_over(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.script("a", Hang(3))
    async with make_gateway(provider_server, tmp_path, retries=0, timeout=0.3, fallbacks={"m-a": ["m-b"]}) as gw:
        result = await gw.chat(ask(model="m-a"), caller=USER)
    assert result.model == "m-b"
    [failed] = [a for a in log_lines(tmp_path)[0]["attempts"] if a["outcome"] == "error"]  # type: ignore[attr-defined]
    assert "0.3s" in failed["error"] or "timed out" in failed["error"]


async def test_hanging_stream_times_out_and_fails_over(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.script("a", Hang(3))
    provider_server.script("b", Answer("quick"))
    async with make_gateway(provider_server, tmp_path, retries=0, timeout=0.3, fallbacks={"m-a": ["m-b"]}) as gw:
        events = await collect(gw.stream(ask(model="m-a"), caller=USER))
    assert "".join(e.text for e in events) == "quick"
    assert events[-1].result is not None
    assert "failover after m-a" in events[-1].result.reason


class ThreadRecordingCounter:
    name = "recording"

    def __init__(self) -> None:
        self.inner = BpeCounter()
        self.threads: set[str] = set()

    def count(self, text: str) -> int:
        if len(text) > 1000:
            self.threads.add(threading.current_thread().name)
        return self.inner.count(text)


async def test_long_prompt_is_counted_in_a_worker_thread(provider_server: ProviderServer, tmp_path: Path) -> None:
    short, long = ask(model="m-b"), ask("lorem ipsum dolor " * 2000, model="m-b")
    assert len(long.messages[0].text()) > THREADED_COUNT_CHARS
    counter = ThreadRecordingCounter()
    provider_server.script("b", Answer("ok"), Answer("ok", usage=None))
    async with make_gateway(provider_server, tmp_path, counter=counter) as gw:
        await gw.chat(short, caller=USER)
        assert counter.threads == set()
        result = await gw.chat(long, caller=USER)
    assert len(counter.threads) == 1
    assert threading.current_thread().name not in counter.threads
    assert result.usage.input_tokens == count_prompt(long.messages) > 2000


async def test_bad_request_is_neither_retried_nor_failed_over(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.script("a", Fail(400, "max_tokens too large"))
    async with make_gateway(provider_server, tmp_path, fallbacks={"m-a": ["m-b"]}) as gw:
        with pytest.raises(ProviderError) as caught:
            await gw.chat(ask(model="m-a"), caller=USER)
    assert caught.value.status == 400
    assert not caught.value.retryable
    assert len(provider_server.requests("a")) == 1
    assert provider_server.requests("b") == []
    assert gw.ledger is not None
    assert gw.ledger.spent("user:alice") == 0


async def test_unauthorized_deployment_fails_over_without_retrying(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    provider_server.script("a", Fail(401, "bad key"))
    async with make_gateway(provider_server, tmp_path, fallbacks={"m-a": ["m-b"]}) as gw:
        assert (await gw.chat(ask(model="m-a"), caller=USER)).model == "m-b"
    assert len(provider_server.requests("a")) == 1


async def test_unreadable_answer_is_retried(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.script("a", BadJson(), Answer("fine"))
    async with make_gateway(provider_server, tmp_path) as gw:
        result = await gw.chat(ask(model="m-a"), caller=USER)
    assert (result.message.text(), result.attempts) == ("fine", 2)


async def test_every_candidate_failing_raises_the_last_error_and_logs_it(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    provider_server.script("a", Fail(503))
    provider_server.script("b", Fail(500, "b is down"))
    async with make_gateway(provider_server, tmp_path, retries=0, fallbacks={"m-a": ["m-b"]}) as gw:
        with pytest.raises(ProviderError) as caught:
            await gw.chat(ask(model="m-a"), caller=USER)
    assert caught.value.provider == "pb"
    [entry] = log_lines(tmp_path)
    assert entry["outcome"] == "error"
    assert [a["outcome"] for a in entry["attempts"]] == ["error", "error"]  # type: ignore[attr-defined]


async def test_request_that_could_exceed_the_budget_is_refused_before_any_spend(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    budgets = BudgetSettings(users={"alice": BudgetSpec(daily=Decimal("0.01"))})
    async with make_gateway(provider_server, tmp_path, budgets=budgets) as gw:
        # up to 1000 output tokens at $10/M is $0.01, plus the prompt: over the $0.01 left
        with pytest.raises(BudgetExceeded) as caught:
            await gw.chat(ask(model="m-a", max_tokens=1000), caller=USER)
        assert (caught.value.scope, caught.value.period) == ("user:alice", "day")
        assert provider_server.requests() == []
        result = await gw.chat(ask(model="m-a", max_tokens=900), caller=USER)
    assert result.message.text() == "ok"
    entries = log_lines(tmp_path)
    assert (entries[0]["outcome"], entries[0]["error_type"]) == ("refused", "BudgetExceeded")


async def test_project_budget_counts_what_every_member_spent(provider_server: ProviderServer, tmp_path: Path) -> None:
    budgets = BudgetSettings(projects={"apollo": BudgetSpec(total=Decimal("0.0001"))})
    provider_server.script("b", Answer("x", usage=(100, 100)))  # $0.000075
    async with make_gateway(provider_server, tmp_path, budgets=budgets) as gw:
        await gw.chat(ask(model="m-b", max_tokens=10), caller=USER)
        with pytest.raises(BudgetExceeded) as caught:
            await gw.chat(ask(model="m-b", max_tokens=100), caller=USER.model_copy(update={"user": "bob"}))
    assert caught.value.scope == "project:apollo"
    assert caught.value.spent == "0.000075"
    assert len(provider_server.requests("b")) == 1


async def test_budget_skips_a_fallback_that_could_overspend(provider_server: ProviderServer, tmp_path: Path) -> None:
    budgets = BudgetSettings(default_user=BudgetSpec(total=Decimal("0.001")))
    async with make_gateway(provider_server, tmp_path, budgets=budgets, fallbacks={"m-a": ["m-b"]}) as gw:
        result = await gw.chat(ask(model="m-a", max_tokens=500), caller=USER)
    assert result.model == "m-b"  # m-a could cost $0.005; m-b at most $0.0003
    assert provider_server.requests("a") == []


async def test_rate_limit_refuses_then_refills(provider_server: ProviderServer, tmp_path: Path) -> None:
    fake = FakeTime()
    limits = RateLimitSettings(users={"alice": RateLimitSpec(requests_per_minute=2)})
    async with make_gateway(provider_server, tmp_path, fake=fake, rate_limits=limits) as gw:
        await gw.chat(ask(model="m-b"), caller=USER)
        await gw.chat(ask(model="m-b"), caller=USER)
        with pytest.raises(RateLimited) as caught:
            await gw.chat(ask(model="m-b"), caller=USER)
        assert caught.value.retry_after == pytest.approx(30)
        await gw.chat(ask(model="m-b"), caller=USER.model_copy(update={"user": "bob"}))  # bob has no limit
        fake.now += 30
        await gw.chat(ask(model="m-b"), caller=USER)
    assert len(provider_server.requests("b")) == 4


async def test_missing_usage_is_counted_with_the_tokenizer(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.script("b", Answer("The answer is forty-two.", usage=None))
    request = ask("What is six times seven?", model="m-b")
    async with make_gateway(provider_server, tmp_path) as gw:
        result = await gw.chat(request, caller=USER)
    assert result.usage.input_tokens == count_prompt(request.messages)
    assert result.usage.output_tokens == count_completion(result.message) > 0


async def test_unknown_model_and_impossible_requests_are_refused(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    tool = ToolSpec(name="lookup")
    async with make_gateway(provider_server, tmp_path) as gw:
        with pytest.raises(ModelNotFound):
            await gw.chat(ask(model="nope"), caller=USER)
        with pytest.raises(NoEligibleModel):
            await gw.chat(ask(model="m-plain", tools=(tool,)), caller=USER)
        with pytest.raises(NoEligibleModel):
            await gw.chat(ask(model="m-a", max_tokens=7999), caller=USER)
        with pytest.raises(NoEligibleModel):
            await gw.chat(ask(model="m-a", max_cost=0.0001), caller=USER)
    assert provider_server.requests() == []


async def test_model_none_uses_the_route_function(provider_server: ProviderServer, tmp_path: Path) -> None:
    seen: list[ChatRequest] = []

    async def route(request: ChatRequest) -> tuple[list[str], str]:
        seen.append(request)
        return ["c-a", "m-b"], "custom: code question"

    provider_server.script("c", Fail(529, "overloaded"))
    async with make_gateway(provider_server, tmp_path, retries=0, route=route) as gw:
        result = await gw.chat(ask(), caller=USER)
    assert len(seen) == 1
    assert result.model == "m-b"
    assert result.reason.startswith("custom: code question")
    assert provider_server.requests("c")[0].headers["x-api-key"] == KEYS["pc"]


async def test_default_route_orders_by_policy(provider_server: ProviderServer, tmp_path: Path) -> None:
    async with make_gateway(provider_server, tmp_path) as gw:
        cheap = await gw.chat(ask(policy="cost_first"), caller=USER)
        best = await gw.chat(ask(policy="quality_first"), caller=USER)
        mid = await gw.chat(ask(), caller=USER)
    assert (cheap.model, best.model, mid.model) == ("m-plain", "m-a", "c-a")


# ---- streaming ----


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    with anyio.fail_after(5):
        return [event async for event in stream]


@pytest.mark.parametrize("model", ["m-a", "c-a"])
async def test_streamed_answer_assembles_to_the_plain_answer(
    provider_server: ProviderServer, tmp_path: Path, model: str
) -> None:
    deployment = {"m-a": "a", "c-a": "c"}[model]
    answer = Answer(
        "Let me look that up.", tool_calls=(("call_1", "lookup", {"q": "weather", "n": 2}),), usage=(321, 45), chunks=4
    )
    provider_server.script(deployment, answer, answer)
    request = ask(model=model, tools=(ToolSpec(name="lookup", input_schema={"type": "object"}),))
    async with make_gateway(provider_server, tmp_path) as gw:
        plain = await gw.chat(request, caller=USER)
        events = await collect(gw.stream(request, caller=USER))
    texts = [e.text for e in events if e.kind == "text"]
    assert len(texts) == 4
    assert "".join(texts) == plain.message.text() == "Let me look that up."
    assert [e.tool_call for e in events if e.kind == "tool_call"] == list(plain.message.tool_calls)
    done = events[-1].result
    assert done is not None
    assert done.message == plain.message
    assert (done.usage, done.cost_usd, done.finish_reason) == (plain.usage, plain.cost_usd, "tool_calls")
    assert provider_server.requests(deployment)[1].body["stream"] is True
    assert gw.ledger is not None
    assert gw.ledger.totals("user:alice").requests == 2


async def test_stream_fails_over_before_the_first_event(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.script("a", Fail(503), Fail(503), Fail(503))
    provider_server.script("b", Answer("streamed from b"))
    async with make_gateway(provider_server, tmp_path, fallbacks={"m-a": ["m-b"]}) as gw:
        events = await collect(gw.stream(ask(model="m-a"), caller=USER))
    assert "".join(e.text for e in events) == "streamed from b"
    assert events[-1].result is not None
    assert events[-1].result.model == "m-b"


@pytest.mark.parametrize(("model", "deployment"), [("m-a", "a"), ("c-a", "c")])
async def test_in_stream_error_event_before_any_text_is_retried(
    provider_server: ProviderServer, tmp_path: Path, model: str, deployment: str
) -> None:
    provider_server.script(deployment, StreamError("overloaded"), Answer("second try"))
    async with make_gateway(provider_server, tmp_path) as gw:
        events = await collect(gw.stream(ask(model=model), caller=USER))
    assert "".join(e.text for e in events) == "second try"
    assert events[-1].result is not None
    assert events[-1].result.attempts == 2


async def test_stream_cut_after_text_raises_and_does_not_replay(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    provider_server.script("a", StreamCut("half an ans"))
    received: list[str] = []

    async def consume(stream: AsyncIterator[StreamEvent]) -> None:
        with anyio.fail_after(5):
            async for event in stream:
                received.append(event.text)  # noqa: PERF401 - keep what arrived before the failure

    async with make_gateway(provider_server, tmp_path, fallbacks={"m-a": ["m-b"]}) as gw:
        with pytest.raises(ProviderError):
            await consume(gw.stream(ask(model="m-a"), caller=USER))
        assert gw.ledger is not None
        # the provider bills what it generated: the prompt and the received text are charged
        delivered = ChatMessage(role="assistant", content="half an ans")
        usage = Usage(input_tokens=count_prompt(ask().messages), output_tokens=count_completion(delivered))
        assert gw.ledger.spent("user:alice") == cost_of(MODELS[0], usage) > 0
    assert "".join(received) == "half an ans"
    assert provider_server.requests("b") == []
    [entry] = log_lines(tmp_path)
    assert (entry["outcome"], entry["output_tokens"]) == ("error", usage.output_tokens)


async def test_stream_refused_by_budget_never_reaches_the_provider(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    budgets = BudgetSettings(default_user=BudgetSpec(total=Decimal(0)))
    async with make_gateway(provider_server, tmp_path, budgets=budgets) as gw:
        with pytest.raises(BudgetExceeded):
            await collect(gw.stream(ask(model="m-b"), caller=USER))
    assert provider_server.requests() == []


async def test_abandoned_stream_releases_its_budget_hold(provider_server: ProviderServer, tmp_path: Path) -> None:
    budgets = BudgetSettings(default_user=BudgetSpec(total=Decimal("0.01")))
    provider_server.script("a", Answer("many words here", chunks=3))
    async with make_gateway(provider_server, tmp_path, budgets=budgets) as gw:
        stream = gw.stream(ask(model="m-a", max_tokens=600), caller=USER)  # holds up to $0.006
        with anyio.fail_after(5):
            first = await anext(aiter(stream))
            assert first.kind == "text"
            with pytest.raises(BudgetExceeded):
                await gw.chat(ask(model="m-a", max_tokens=600), caller=USER)  # 0.006 + 0.006 > 0.01
            await stream.aclose()  # type: ignore[attr-defined]
            assert gw.ledger is not None
            assert gw.ledger.totals("user:alice").requests == 1  # the abandoned part is charged
            assert (await gw.chat(ask(model="m-a", max_tokens=600), caller=USER)).message.text() == "ok"
    assert [e["outcome"] for e in log_lines(tmp_path)] == ["refused", "abandoned", "ok"]


# ---- the request log ----


async def test_request_log_redacts_keys_and_leaves_prompts_out(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.script("a", Fail(401, f"invalid key {KEYS['pa']}"))
    async with make_gateway(provider_server, tmp_path, fallbacks={"m-a": ["m-b"]}) as gw:
        await gw.chat(ask("my secret plan", model="m-a"), caller=USER)
    text = (tmp_path / "logs" / "llm.jsonl").read_text()
    assert KEYS["pa"] not in text
    assert "[redacted:key-pa]" in text
    assert "my secret plan" not in text
    [entry] = log_lines(tmp_path)
    assert (entry["model"], entry["provider"], entry["user"], entry["project"]) == ("m-b", "pb", "alice", "apollo")
    assert entry["cost_usd"] == "0.0000045"  # 10 * 0.15/M + 5 * 0.6/M


async def test_request_log_keeps_prompts_when_asked(provider_server: ProviderServer, tmp_path: Path) -> None:
    async with make_gateway(provider_server, tmp_path, log_prompts=True) as gw:
        await gw.chat(ask("my secret plan", model="m-b"), caller=USER)
    [entry] = log_lines(tmp_path)
    assert entry["messages"][0]["content"] == "my secret plan"  # type: ignore[index]
    assert entry["answer"]["content"] == "ok"  # type: ignore[index]


async def test_chat_messages_with_tool_results_round_trip_through_the_gateway(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    from hanzo_hub.llm.types import ToolCall

    call = ToolCall(id="call_9", name="lookup", arguments={"q": "x"})
    request = ChatRequest(
        model="c-a",
        messages=(
            ChatMessage(role="system", content="be brief"),
            ChatMessage(role="user", content="look it up"),
            ChatMessage(role="assistant", tool_calls=(call,)),
            ChatMessage(role="tool", tool_call_id="call_9", content="found"),
        ),
        tools=(ToolSpec(name="lookup"),),
    )
    async with make_gateway(provider_server, tmp_path) as gw:
        await gw.chat(request, caller=USER)
    body = provider_server.requests("c")[0].body
    assert body["system"] == "be brief"
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call_9", "name": "lookup", "input": {"q": "x"}}],
    }
    assert body["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_9", "content": "found"}],
    }
