"""Pure parts of the llm surface: candidate filtering, the tier-ordered fallback, and sampling translation."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from hanzo_hub.config import HubSettings
from hanzo_hub.errors import NoEligibleModel
from hanzo_hub.hub.llm_route import RoutePlanner, cascade_ladder, tier_order
from hanzo_hub.hub.sampling import to_chat_request, to_create_message_result
from hanzo_hub.llm.registry import load_registry
from hanzo_hub.llm.types import ChatMessage, ChatRequest, ChatResult, ToolCall, ToolSpec
from tests.hub.llm_support import MODELS

TINY = {"id": "tiny", "provider": "p", "api": "openai_compat", "price_in": 0.1, "price_out": 0.1,
        "context_window": 100, "capabilities": [], "tier": "fast"}  # fmt: skip


def _planner(tmp_path: Path, **llm: object) -> RoutePlanner:
    section = {"providers": {"p": {"api": "openai_compat", "base_url": "http://127.0.0.1:9/v1"}}, **llm}
    settings = HubSettings(home=tmp_path, llm=section, memory={"embedder": "fake"})
    return RoutePlanner(settings, load_registry(settings.llm.models))


def _ask(text: str, **extra: object) -> ChatRequest:
    return ChatRequest(messages=(ChatMessage(role="user", content=text),), **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "order"),
    [("balanced", ["tiny", "small", "big"]), ("cost_first", ["tiny", "small", "big"]),
     ("quality_first", ["big", "tiny", "small"])],
)  # fmt: skip
def test_tier_order_follows_the_policy(tmp_path: Path, policy: str, order: list[str]) -> None:
    planner = _planner(tmp_path, models=[*MODELS, TINY])
    assert [m.id for m in tier_order(planner.candidates(), policy)] == order


MID = {**TINY, "id": "mid", "price_in": 3.0, "price_out": 6.0, "context_window": 32000, "tier": "mid"}
MID2 = {**MID, "id": "mid2", "price_in": 4.0}


def test_cascade_ladder_is_cheapest_then_the_cheapest_mid_then_the_best(tmp_path: Path) -> None:
    planner = _planner(tmp_path, models=[*MODELS, MID, MID2])
    by_id = {m.id: m for m in planner.candidates()}

    def ladder(*ids: str) -> list[str]:
        return [m.id for m in cascade_ladder([by_id[i] for i in ids], 100, 100)]

    assert ladder("big", "mid2", "small", "mid") == ["small", "mid", "big"]
    assert ladder("small", "big") == ["small", "big"]
    assert ladder("mid2", "big") == ["mid2", "big"]  # no fast model: the mid one is the cheapest rung
    assert ladder("big") == ["big"]  # one rung: no cascade
    assert ladder("small", "mid") == ["small", "mid"]  # mid is the best eligible


def test_candidates_default_to_every_model_of_a_configured_provider(tmp_path: Path) -> None:
    planner = _planner(tmp_path, models=[*MODELS, TINY])
    assert [m.id for m in planner.candidates()] == ["small", "big", "tiny"]
    assert [m.id for m in _planner(tmp_path, models=MODELS, route_models=["big"]).candidates()] == ["big"]


def test_eligibility_drops_models_that_cannot_take_the_request(tmp_path: Path) -> None:
    planner = _planner(tmp_path, models=[*MODELS, TINY])
    tools = (ToolSpec(name="t"),)
    assert [m.id for m in planner.eligible(_ask("hi", max_tokens=50))] == ["small", "big", "tiny"]
    assert [m.id for m in planner.eligible(_ask("hi", max_tokens=500))] == ["small", "big"]  # tiny's window
    assert [m.id for m in planner.eligible(_ask("hi", tools=tools, max_tokens=10))] == ["small", "big"]
    assert [m.id for m in planner.eligible(_ask("hi", max_tokens=1000, max_cost=0.0001))] == []


async def test_route_refuses_clearly_when_nothing_fits(tmp_path: Path) -> None:
    planner = _planner(tmp_path, models=MODELS, route_models=["small"])
    with pytest.raises(NoEligibleModel):
        await planner.route(_ask("hi", max_tokens=90_000))
    models, reason = await planner.route(_ask("hi"))
    assert (models, reason) == (["small"], "only eligible model, policy=balanced")


def test_sampling_request_translation_keeps_roles_tools_and_preferences() -> None:
    registry = load_registry(MODELS)
    params = types.CreateMessageRequestParams(
        messages=[
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text="weather?")),
            types.SamplingMessage(
                role="assistant", content=[types.ToolUseContent(type="tool_use", id="u1", name="w", input={"c": 1})]
            ),
            types.SamplingMessage(
                role="user",
                content=[
                    types.ToolResultContent(
                        type="tool_result", tool_use_id="u1", content=[types.TextContent(type="text", text="sunny")]
                    )
                ],
            ),
        ],
        system_prompt="be brief",
        max_tokens=64,
        model_preferences=types.ModelPreferences(hints=[types.ModelHint(name="big")]),
        tools=[types.Tool(name="w", input_schema={"type": "object"})],
    )
    request = to_chat_request(params, registry)
    assert (request.model, request.policy, request.max_tokens) == ("big", "pinned", 64)
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "tool"]
    assert request.messages[2].tool_calls == (ToolCall(id="u1", name="w", arguments={"c": 1}),)
    assert (request.messages[3].tool_call_id, request.messages[3].text()) == ("u1", "sunny")
    assert [t.name for t in request.tools] == ["w"]
    cheap = params.model_copy(update={"model_preferences": types.ModelPreferences(cost_priority=0.9)})
    assert to_chat_request(cheap, registry).policy == "cost_first"


def test_sampling_answer_translation() -> None:
    message = ChatMessage(role="assistant", content="", tool_calls=(ToolCall(id="c", name="w", arguments={}),))
    result = ChatResult(model="small", provider="p", message=message, finish_reason="tool_calls")
    with_tools = to_create_message_result(result, with_tools=True)
    assert with_tools.stop_reason == "toolUse"
    assert isinstance(with_tools.content, list)
    assert isinstance(with_tools.content[0], types.ToolUseContent)
    plain = to_create_message_result(result.model_copy(update={"finish_reason": "length"}), with_tools=False)
    assert (plain.model, plain.stop_reason, plain.role) == ("small", "maxTokens", "assistant")
