"""The cascade through the hub: the cheap model answers first, the learned escalator keeps it or asks the best one.

Against the scripted loopback provider (``small`` $1/$2, ``big`` $10/$30 per million tokens). The escalator's
warm-up keeps the first cheap answer and escalates the second, so the two requests show both paths.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client

from hanzo_hub.config.llm import QueryCategory
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from hanzo_hub.llm.types import ChatMessage, ChatRequest, ToolSpec
from tests.conftest import MakeSettings, inproc
from tests.hub.llm_support import BACKENDS, NO_MEMORY, llm_section
from tests.llm.providers_server import Answer, Fail, ProviderServer, _provider_server_module, provider_server

__all__ = ["_provider_server_module", "provider_server"]

pytest.importorskip("torch")

EVERY: list[QueryCategory] = ["code", "math", "creative", "factual_qa", "multimodal", "summarization",
                              "translation", "tool_use"]  # fmt: skip
"""The test hub embeds with the fake embedder, so categories are arbitrary: cascade all of them."""


def _cascading(provider_server: ProviderServer) -> dict[str, object]:
    return llm_section(provider_server, cascade={"categories": EVERY})


async def test_cheap_answer_kept_then_escalated_costs_both_and_feedback_trains_the_escalator(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script(
        "p",
        Answer("3 + 4 = 7. #### 7", usage=(100, 20)),  # request 1: small, kept
        Answer("3 + 4 = 8. #### 8", usage=(100, 20)),  # request 2: small ...
        Answer("3 + 4 = 7. #### 7", usage=(100, 30)),  # ... then big
    )
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=_cascading(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        kept = await client.call_tool("llm__complete", {"prompt": "Tom has 3 apples and buys 4. How many?"})
        escalated = await client.call_tool("llm__complete", {"prompt": "Ann has 3 pens and buys 4. How many?"})
        assert kept.structured_content is not None
        assert escalated.structured_content is not None
        rated = await client.call_tool(
            "llm__feedback", {"request_id": escalated.structured_content["request_id"], "rating": 1}
        )
        cascade = hub.llm.planner._cascade
        assert cascade is not None
        escalator_steps, router_steps = cascade.escalator.bandit.steps, cascade.router.bandit.steps
    k, e = kept.structured_content, escalated.structured_content
    assert (k["model"], k["reason"].split(" (")[0]) == ("small", "cascade: kept small")
    assert k["cost_usd"] == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6)
    assert (e["model"], e["reason"].split(" (")[0]) == ("big", "cascade: escalated from small")
    assert e["cost_usd"] == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6 + (100 * 10.0 + 30 * 30.0) / 1e6)
    assert [r.body["model"] for r in provider_server.requests("p")] == ["small", "small", "big"]
    assert not rated.is_error
    assert rated.structured_content == {"request_id": e["request_id"], "model": "big", "quality": 1.0}
    assert (escalator_steps, router_steps) == (1, 1)
    [line] = (settings.home / "llm" / "feedback.jsonl").read_text().splitlines()
    assert json.loads(line)["cascade"] is True
    assert (settings.home / "llm" / "escalator.npz").is_file()


async def test_a_failed_escalation_returns_the_cheap_answer_and_says_why(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer("#### 7"), Answer("#### 8"), Fail(500))
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=_cascading(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.call_tool("llm__complete", {"prompt": "3 + 4?"})
        second = await client.call_tool("llm__complete", {"prompt": "3 + 5?"})
        assert second.structured_content is not None
        rated = await client.call_tool(
            "llm__feedback", {"request_id": second.structured_content["request_id"], "rating": 0}
        )
    assert not second.is_error
    assert second.structured_content["model"] == "small"
    assert "escalation failed" in second.structured_content["reason"]
    assert rated.is_error  # nothing was decided and judged, so nothing is trained


async def test_requests_with_tools_or_a_named_model_do_not_cascade(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=_cascading(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    ask = (ChatMessage(role="user", content="3 + 4?"),)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        pinned = await client.call_tool("llm__complete", {"prompt": "3 + 4?", "model": "big"})
        planner = hub.llm.planner
        plain = await planner.cascade_plan(ChatRequest(messages=ask))
        with_tools = await planner.cascade_plan(ChatRequest(messages=ask, tools=(ToolSpec(name="t"),)))
        explicit = await planner.cascade_plan(ChatRequest(messages=ask, model="small"))
    assert pinned.structured_content is not None
    assert pinned.structured_content["reason"] == "pinned"
    assert plain is not None
    assert (plain.cheap, plain.best) == ("small", "big")
    assert with_tools is None
    assert explicit is None
    assert [r.body["model"] for r in provider_server.requests("p")] == ["big"]


async def test_the_cascade_check_and_the_route_share_one_query_embedding(
    make_settings: MakeSettings, provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=_cascading(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    ask = ChatRequest(messages=(ChatMessage(role="user", content="Translate 'good morning' to French."),))
    async with Hub.open(settings) as hub:
        planner = hub.llm.planner
        plan = await planner.cascade_plan(ask)  # builds the router and embeds the query
        assert plan is not None
        embedder = planner._embedder
        assert embedder is not None
        calls: list[object] = []
        real = embedder.embed

        async def counted(texts: list[str]) -> object:
            calls.append(texts)
            return await real(texts)

        monkeypatch.setattr(embedder, "embed", counted)
        await planner.route(ask)
        await planner.cascade_plan(ask)
    assert calls == []  # the route and a second look reuse the vector of the first


MID = {"id": "mid", "provider": "p", "api": "openai_compat", "price_in": 3.0, "price_out": 6.0,
       "context_window": 32000, "capabilities": ["tools"], "tier": "mid"}  # fmt: skip


async def test_with_a_mid_tier_model_the_cascade_climbs_fast_mid_best_and_saves_each_rungs_escalator(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script(
        "p",
        Answer("3 + 4 = 7. #### 7", usage=(100, 20)),  # request 1: small, kept (rung 0's warm-up keeps first)
        Answer("3 + 4 = 8. #### 8", usage=(100, 20)),  # request 2: small, escalated ...
        Answer("3 + 4 = 7. #### 7", usage=(100, 30)),  # ... to mid, kept (rung 1's warm-up keeps first)
    )
    section = _cascading(provider_server)
    section["models"] = [*section["models"], MID]  # type: ignore[list-item]
    section["route_models"] = ["small", "mid", "big"]
    settings = make_settings({"alpha": inproc("alpha")}, llm=section, backends=BACKENDS, memory=NO_MEMORY)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        plan = await hub.llm.planner.cascade_plan(ChatRequest(messages=(ChatMessage(role="user", content="3+4?"),)))
        first = await client.call_tool("llm__complete", {"prompt": "Tom has 3 apples and buys 4. How many?"})
        second = await client.call_tool("llm__complete", {"prompt": "Ann has 3 pens and buys 4. How many?"})
        assert second.structured_content is not None
        rated = await client.call_tool(
            "llm__feedback", {"request_id": second.structured_content["request_id"], "rating": 1}
        )
        cascade = hub.llm.planner._cascade
        assert cascade is not None
        steps = [e.bandit.steps for e in cascade.escalators]
    assert plan is not None
    assert plan.ladder == ("small", "mid", "big")
    assert first.structured_content is not None
    assert first.structured_content["model"] == "small"
    s = second.structured_content
    assert s["model"] == "mid"
    assert s["reason"].startswith("cascade: escalated from small (")
    assert ", then kept mid (" in s["reason"]
    assert s["cost_usd"] == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6 + (100 * 3.0 + 30 * 6.0) / 1e6)
    assert [r.body["model"] for r in provider_server.requests("p")] == ["small", "small", "mid"]
    assert rated.structured_content == {"request_id": s["request_id"], "model": "mid", "quality": 1.0}
    assert steps == [1, 1]  # the rating trained both rungs' escalators
    assert (settings.home / "llm" / "escalator.npz").is_file()
    assert (settings.home / "llm" / "escalator-1.npz").is_file()
    async with Hub.open(settings) as hub:  # both come back after a restart
        await hub.llm.planner._ensure_router()
        cascade = hub.llm.planner._cascade
        assert cascade is not None
        assert [e.bandit.steps for e in cascade.escalators] == [1, 1]
