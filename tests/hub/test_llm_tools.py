"""The ``llm`` server through the hub: complete, chat (the whole pipeline with real catalog tools), feedback and
resources, answered by the real gateway against the scripted loopback provider server."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.hub import llm_route
from hanzo_hub.hub.chat import MAX_TOOL_CALLS
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.llm_runtime import NO_PROVIDER
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc
from tests.hub.llm_support import BACKENDS, FAKE, MEMORY, NO_MEMORY, llm_section
from tests.llm.providers_server import Answer, Fail, ProviderServer, _provider_server_module, provider_server

__all__ = ["_provider_server_module", "provider_server"]


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _read(client: Client, original: str) -> Any:
    """Read one of the llm server's resources by its own URI (the hub exposes it under a prefix)."""
    [uri] = [str(r.uri) for r in (await client.list_resources()).resources if str(r.uri).endswith(original)]
    result = await client.read_resource(uri)
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]


def _bodies(server: ProviderServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests("p")]


async def test_without_a_provider_the_tools_list_and_answer_a_clear_error(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, llm={"enabled": True})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("llm__complete", {"prompt": "hi"})
    assert {"llm__complete", "llm__chat", "llm__feedback"} <= names
    assert result.is_error
    assert NO_PROVIDER in _text(result)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_without_a_provider_complete_uses_the_clients_model(make_settings: MakeSettings, mode: str) -> None:
    seen: list[types.CreateMessageRequestParams] = []

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen.append(params)
        text = types.TextContent(type="text", text="from the client's model")
        return types.CreateMessageResult(role="assistant", content=text, model="client-llm")

    settings = make_settings({"alpha": inproc("alpha")}, llm={"enabled": True})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode, sampling_callback=sampling) as client:
        result = await client.call_tool("llm__complete", {"prompt": "hi", "system": "be brief", "max_tokens": 7})
    assert not result.is_error, _text(result)
    assert _text(result) == "from the client's model"
    assert result.structured_content is not None
    assert (result.structured_content["model"], result.structured_content["provider"]) == ("client-llm", "client")
    [params] = seen
    assert (params.system_prompt, params.max_tokens) == ("be brief", 7)


async def test_no_llm_server_unless_configured(make_settings: MakeSettings) -> None:
    async with Hub.open(make_settings({"alpha": inproc("alpha")})) as hub, Client(build_server(hub)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert not any(n.startswith("llm__") for n in names)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_complete_names_model_cost_reason_and_request_id(
    make_settings: MakeSettings, provider_server: ProviderServer, mode: str
) -> None:
    provider_server.script("p", Answer("four", usage=(1000, 200)))
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        result = await client.call_tool("llm__complete", {"prompt": "2+2?", "max_tokens": 50})
        report = await _read(client, "llm://usage")
    assert not result.is_error, _text(result)
    assert _text(result) == "four"
    out = result.structured_content
    assert out is not None
    assert (out["model"], out["provider"]) == ("small", "p")
    assert out["cost_usd"] == pytest.approx((1000 * 1.0 + 200 * 2.0) / 1e6)
    assert out["usage"] == {"input_tokens": 1000, "output_tokens": 200}
    assert "tier order" in out["reason"]
    assert out["request_id"]
    [sent] = _bodies(provider_server)
    assert sent["model"] == "small"
    assert sent["messages"][-1] == {"role": "user", "content": "2+2?"}
    assert report["by_model"]["small"]["cost_usd"] == "0.0014"
    assert report["total"]["requests"] == 1


async def test_complete_fails_over_and_reports_a_failure_as_an_error_result(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Fail(500), Fail(500))
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        result = await client.call_tool("llm__complete", {"prompt": "hi"})
        bad = await client.call_tool("llm__complete", {"messages": [{"role": "robot", "content": "x"}]})
        empty = await client.call_tool("llm__complete", {})
    assert result.is_error
    assert "completion failed" in _text(result)
    assert [b["model"] for b in _bodies(provider_server)] == ["small", "big"]
    assert bad.is_error
    assert empty.is_error


async def test_explicit_model_is_used(make_settings: MakeSettings, provider_server: ProviderServer) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        result = await client.call_tool("llm__complete", {"prompt": "hi", "model": "big"})
    assert result.structured_content is not None
    assert result.structured_content["model"] == "big"
    assert [b["model"] for b in _bodies(provider_server)] == ["big"]


async def test_feedback_rewards_the_routed_request_and_persists(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        done = await client.call_tool("llm__complete", {"prompt": "write a haiku about the sea"})
        assert done.structured_content is not None
        request_id = done.structured_content["request_id"]
        rated = await client.call_tool("llm__feedback", {"request_id": request_id, "rating": 0.75})
        again = await client.call_tool("llm__feedback", {"request_id": request_id, "rating": "regenerated"})
        unknown = await client.call_tool("llm__feedback", {"request_id": "nope", "rating": 1})
        out_of_range = await client.call_tool("llm__feedback", {"request_id": request_id, "rating": 3})
        bandit_steps = hub.llm.planner._router.bandit.steps
    assert not rated.is_error, _text(rated)
    assert rated.structured_content == {"request_id": request_id, "model": "small", "quality": 0.75}
    assert again.is_error  # one rating per answer: the bandit must not count it twice
    assert "already rated 0.75" in _text(again)
    assert unknown.is_error
    assert out_of_range.is_error
    assert bandit_steps == 1
    lines = (settings.home / "llm" / "feedback.jsonl").read_text().splitlines()
    assert [json.loads(line)["quality"] for line in lines] == [0.75]
    assert (settings.home / "llm" / "router.npz").is_file()


async def test_asking_the_same_again_rates_the_earlier_answer_as_regenerated(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    ask = {"prompt": "write a haiku about the sea", "system": "be brief"}
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first = await client.call_tool("llm__complete", ask)
        other = await client.call_tool("llm__complete", {"prompt": "write a haiku about rain", "system": "be brief"})
        second = await client.call_tool("llm__complete", ask | {"policy": "quality_first"})
        third = await client.call_tool("llm__complete", ask)
        ids = [r.structured_content["request_id"] for r in (first, other, second, third)]  # type: ignore[index]
        rate_first = await client.call_tool("llm__feedback", {"request_id": ids[0], "rating": 1})
        rate_third = await client.call_tool("llm__feedback", {"request_id": ids[3], "rating": 1})
        bandit_steps = hub.llm.planner._router.bandit.steps
    assert second.structured_content is not None
    assert third.structured_content is not None
    assert f"({ids[0]}) was rated 0 as regenerated" in second.structured_content["reason"]
    assert f"({ids[2]}) was rated 0 as regenerated" in third.structured_content["reason"]
    assert "regenerated" not in other.structured_content["reason"]  # type: ignore[index]
    assert rate_first.is_error
    assert "already rated 0" in _text(rate_first)
    assert not rate_third.is_error, _text(rate_third)
    assert bandit_steps == 3
    lines = [json.loads(line) for line in (settings.home / "llm" / "feedback.jsonl").read_text().splitlines()]
    assert [(x["request_id"], x["quality"], x.get("implicit")) for x in lines] == [
        (ids[0], 0.0, "regenerated"),
        (ids[2], 0.0, "regenerated"),
        (ids[3], 1.0, None),
    ]


async def test_regeneration_is_not_read_when_its_window_is_zero(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    section = llm_section(provider_server, router={"regeneration_window": 0})
    settings = make_settings({"alpha": inproc("alpha")}, llm=section, backends=BACKENDS, memory=NO_MEMORY)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first = await client.call_tool("llm__complete", {"prompt": "hi"})
        second = await client.call_tool("llm__complete", {"prompt": "hi"})
        rated = await client.call_tool(
            "llm__feedback",
            {"request_id": first.structured_content["request_id"], "rating": 0.5},  # type: ignore[index]
        )
    assert "regenerated" not in second.structured_content["reason"]  # type: ignore[index]
    assert not rated.is_error, _text(rated)


async def test_balanced_pacer_state_is_shown_saved_and_restored_across_restarts(
    make_settings: MakeSettings, provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llm_route, "ROUTER_MIN_FEEDBACK", 1)
    # small costs ~7% of big per request: above a 2% target, so every balanced route raises the price of a dollar
    section = llm_section(provider_server, router={"target_cost_share": 0.02})
    settings = make_settings({"alpha": inproc("alpha")}, llm=section, backends=BACKENDS, memory=NO_MEMORY)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        before = (await _read(client, "llm://models"))["router"]
        first = await client.call_tool("llm__complete", {"prompt": "write a haiku about the sea"})
        assert first.structured_content is not None
        await client.call_tool("llm__feedback", {"request_id": first.structured_content["request_id"], "rating": 1})
        for i in range(5):  # different prompts: the same one again would rate the last answer as regenerated
            assert not (await client.call_tool("llm__complete", {"prompt": f"and one about rain, {i}"})).is_error
        during = (await _read(client, "llm://models"))["router"]
    assert before == {"built": False, "target_cost_share": 0.02, "min_ratings": 1}
    assert during["built"]
    assert during["ratings"] == 1
    # five paced routes, each spending at least small's ~7% of big's cost against a 2% target: lam rises by at
    # least 0.02 * 0.03 per route from its start at 0.1
    assert during["balanced_lam"] > 0.1 + 4 * 0.02 * 0.03
    saved = json.loads((settings.home / "llm" / "router_state.json").read_text())
    assert saved == {"models": ["small", "big"], "lam": during["balanced_lam"], "cost_scale": during["cost_scale"]}

    async with Hub.open(settings) as hub:
        router = await hub.llm.planner._ensure_router()
    assert router is not None
    assert (router.lam(llm_route.Policy()), router.cost_scale) == (saved["lam"], saved["cost_scale"])

    (settings.home / "llm" / "router_state.json").write_text("{not json")
    async with Hub.open(settings) as hub:
        router = await hub.llm.planner._ensure_router()
    assert router is not None  # an unreadable state is ignored: a fresh pacer, the router still builds
    assert router.lam(llm_route.Policy()) == 0.1


async def test_models_resource_lists_the_routable_models(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        listed = await _read(client, "llm://models")
    rows = {m["id"]: m for m in listed["models"]}
    assert rows["small"]["routed"]
    assert rows["small"]["configured"]
    assert not rows["gpt-4o"]["configured"]
    assert not rows["gpt-4o"]["routed"]


# -- chat ---------------------------------------------------------------------------------------------------------


async def test_chat_runs_catalog_tools_through_the_hub_and_remembers(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script(
        "p",
        Answer(tool_calls=(("c1", "echo", {"text": "ping"}), ("c2", "add", {"a": 2, "b": 3}))),
        Answer("echo said ping; 2+3=5", usage=(50, 10)),
        Answer("you asked me to echo ping before"),
    )
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=MEMORY, exposure=FAKE
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first = await client.call_tool("llm__chat", {"message": "echo ping and add 2 and 3"})
        second = await client.call_tool("llm__chat", {"message": "echo ping and add 2 and 3", "use_tools": False})
    assert not first.is_error, _text(first)
    out = first.structured_content
    assert out is not None
    assert _text(first) == "echo said ping; 2+3=5"
    assert [(c["name"], c["is_error"]) for c in out["tool_calls"]] == [("echo", False), ("add", False)]
    assert out["remembered"] is True
    assert out["model"] == "small"
    assert out["budget"]["context"] == 32000
    assert out["budget"]["memory"] == 9600
    bodies = _bodies(provider_server)
    offered = {t["function"]["name"] for t in bodies[0]["tools"]}
    assert {"echo", "add"} <= offered
    assert not any(name.startswith("llm__") for name in offered)
    tool_messages = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [("c1", "ping"), ("c2", "5")]
    assert bodies[1]["model"] == "small"
    # The second turn recalled the first exchange into the system prompt.
    assert second.structured_content is not None
    assert second.structured_content["memories_recalled"] >= 1
    assert "echo ping" in bodies[2]["messages"][0]["content"]
    assert "tools" not in bodies[2]


async def test_a_chat_turn_with_tool_calls_can_be_rated_and_asking_it_again_rates_it_as_regenerated(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script(
        "p",
        Answer(tool_calls=(("c1", "echo", {"text": "ping"}),)),
        Answer("echo said ping"),
        Answer(tool_calls=(("c1", "echo", {"text": "ping"}),)),
        Answer("echo said ping again"),
        Answer("no tools this time"),
    )
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=MEMORY, exposure=FAKE
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first = await client.call_tool("llm__chat", {"message": "echo ping"})
        again = await client.call_tool("llm__chat", {"message": "echo ping"})  # memories differ; the turn does not
        assert first.structured_content is not None
        assert again.structured_content is not None
        late = await client.call_tool(
            "llm__feedback", {"request_id": first.structured_content["request_id"], "rating": 1}
        )
        rated = await client.call_tool(
            "llm__feedback", {"request_id": again.structured_content["request_id"], "rating": 1}
        )
        other = await client.call_tool(
            "llm__chat", {"message": "echo ping", "history": [{"role": "user", "content": "earlier"}]}
        )
    assert [c["name"] for c in first.structured_content["tool_calls"]] == ["echo"]
    assert "was rated 0 as regenerated" in again.structured_content["reason"]
    assert late.is_error
    assert "already rated 0" in _text(late)
    assert not rated.is_error, _text(rated)  # the final step's id rates the turn's routing decision
    assert "regenerated" not in other.structured_content["reason"]  # type: ignore[index]  # another history
    lines = [json.loads(line) for line in (settings.home / "llm" / "feedback.jsonl").read_text().splitlines()]
    assert [(x["quality"], x.get("implicit")) for x in lines] == [(0.0, "regenerated"), (1.0, None)]


async def test_chat_tool_calls_pass_the_policy_guard(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer(tool_calls=(("c1", "echo", {"text": "x"}),)), Answer("the tool is disabled"))
    sandbox = {"servers": {"alpha": {"tools": {"echo": {"enabled": False}}}}}
    settings = make_settings(
        {"alpha": inproc("alpha")},
        llm=llm_section(provider_server),
        backends=BACKENDS,
        memory=NO_MEMORY,
        sandbox=sandbox,
        exposure=FAKE,
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        result = await client.call_tool("llm__chat", {"message": "echo x"})
    assert result.structured_content is not None
    assert result.structured_content["tool_calls"] == [{"name": "echo", "arguments": {"text": "x"}, "is_error": True}]
    [tool_message] = [m for m in _bodies(provider_server)[1]["messages"] if m["role"] == "tool"]
    assert "policy denied" in tool_message["content"]


async def test_chat_stops_calling_tools_after_the_turn_budget(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    calls = tuple((f"c{i}", "add", {"a": i, "b": 1}) for i in range(MAX_TOOL_CALLS + 3))
    provider_server.script("p", Answer(tool_calls=calls), Answer("done"))
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY, exposure=FAKE
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        result = await client.call_tool("llm__chat", {"message": "add a lot"})
    assert result.structured_content is not None
    assert len(result.structured_content["tool_calls"]) == MAX_TOOL_CALLS
    final = _bodies(provider_server)[-1]
    assert "tools" not in final  # the model had to answer
    refused = [m for m in final["messages"] if m["role"] == "tool" and m["content"].startswith("not called")]
    assert len(refused) == 3
    assert _text(result) == "done"


async def test_a_trained_router_decides_and_says_so(
    make_settings: MakeSettings, provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llm_route, "ROUTER_MIN_FEEDBACK", 1)
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first = await client.call_tool("llm__complete", {"prompt": "fix this python bug"})
        assert first.structured_content is not None
        await client.call_tool("llm__feedback", {"request_id": first.structured_content["request_id"], "rating": 1})
        second = await client.call_tool("llm__complete", {"prompt": "fix this python bug too"})
        assert second.structured_content is not None
        rated = await client.call_tool(
            "llm__feedback", {"request_id": second.structured_content["request_id"], "rating": 0.5}
        )
    assert first.structured_content["reason"].startswith("tier order (router untrained: 0/1 ratings)")
    assert second.structured_content["reason"].startswith("router: ")
    assert second.structured_content["model"] in {"small", "big"}
    assert not rated.is_error
