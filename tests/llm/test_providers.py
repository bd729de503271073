"""Provider modules: translation both ways, the OpenAI-compatible server-side helpers, error classification."""

from __future__ import annotations

import json
from email.utils import formatdate
from typing import Any

import httpx2
import pytest

from hanzo_hub.errors import ConfigError, ProviderError
from hanzo_hub.llm.providers import PROVIDERS, Deployment, load_provider
from hanzo_hub.llm.providers.anthropic import AnthropicProvider, from_anthropic_response, to_anthropic_body
from hanzo_hub.llm.providers.base import error_from_response, parse_retry_after
from hanzo_hub.llm.providers.openai_compat import (
    OpenAICompatProvider,
    parse_chat_request,
    render_chat_response,
    render_stream_chunk,
    to_openai_body,
)
from hanzo_hub.llm.types import (
    ChatMessage,
    ChatRequest,
    ChatResult,
    ImagePart,
    StreamEvent,
    TextPart,
    ToolCall,
    ToolSpec,
)
from tests.llm.gateway_kit import MODELS
from tests.llm.providers_server import Answer, Fail, ProviderServer

CALL = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris", "days": 3})
TOOL = ToolSpec(name="get_weather", description="Forecast", input_schema={"type": "object", "properties": {}})
PNG = ImagePart(data="iVBORw0KGgo=", mime_type="image/png")

CONVERSATION = ChatRequest(
    model="m-a",
    messages=(
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content=[TextPart(text="What is this and the weather?"), PNG]),
        ChatMessage(role="assistant", content="Checking.", tool_calls=(CALL,)),
        ChatMessage(role="tool", tool_call_id="call_1", content="sunny"),
        ChatMessage(role="user", content="Thanks"),
    ),
    tools=(TOOL,),
    max_tokens=200,
    temperature=1.5,
    stop=("END",),
)


def test_openai_body_translates_images_tool_calls_and_tool_results() -> None:
    body = to_openai_body(CONVERSATION, "gpt-x", stream=True)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this and the weather?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "Thanks"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Forecast", "parameters": TOOL.input_schema},
        }
    ]
    assert (body["model"], body["max_tokens"], body["temperature"], body["stop"]) == ("gpt-x", 200, 1.5, ["END"])
    assert body["stream_options"] == {"include_usage": True}


def test_openai_request_body_parses_back_to_the_same_request() -> None:
    parsed = parse_chat_request(to_openai_body(CONVERSATION, "m-a"))
    assert parsed == CONVERSATION


def test_parse_chat_request_reads_openai_client_shorthands() -> None:
    parsed = parse_chat_request(
        {
            "model": "gpt-4o",
            "messages": [{"role": "developer", "content": "sys"}, {"role": "user", "content": None}],
            "max_completion_tokens": 50,
            "stop": "STOP",
            "stream": True,
        }
    )
    assert parsed.messages[0].role == "system"
    assert (parsed.max_tokens, parsed.stop, parsed.model) == (50, ("STOP",), "gpt-4o")
    assert parse_chat_request({"messages": [{"role": "user", "content": "x"}]}).model is None


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"messages": []},
        {"messages": "hi"},
        {"messages": ["hi"]},
        {"messages": [{"role": "robot", "content": "x"}]},
        {"messages": [{"role": "tool", "content": "x"}]},
        {"messages": [{"role": "user", "content": [{"type": "audio"}]}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]},
        {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
        {"messages": [{"role": "user", "content": "x"}], "temperature": 9},
        {"messages": [{"role": "user", "content": "x"}], "model": 7},
        {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
    ],
)
def test_parse_chat_request_refuses_bad_input_with_a_value_error(body: Any) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        parse_chat_request(body)


def _result(**update: Any) -> ChatResult:
    message = ChatMessage(role="assistant", content="", tool_calls=(CALL,))
    base = ChatResult(
        model="m-a", provider="pa", message=message, finish_reason="tool_calls", cost_usd=0.25, request_id="req-1"
    )
    return base.model_copy(update=update)


def test_render_chat_response_is_an_openai_completion() -> None:
    body = render_chat_response(_result(), created=5)
    assert body["id"] == "req-1"
    assert body["created"] == 5
    [choice] = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == CALL.arguments
    assert choice["message"]["content"] is None
    assert body["hanzo"]["cost_usd"] == 0.25
    # what we render, we parse back
    assert parse_chat_request({"messages": [choice["message"]]}).messages[0].tool_calls == (CALL,)


def test_render_stream_chunks() -> None:
    text = render_stream_chunk(StreamEvent(kind="text", text="he"), request_id="r", model="m", created=1)
    assert text["choices"] == [{"index": 0, "delta": {"content": "he"}, "finish_reason": None}]
    call = render_stream_chunk(StreamEvent(kind="tool_call", tool_call=CALL), request_id="r", model="m", tool_index=2)
    assert call["choices"][0]["delta"]["tool_calls"][0]["index"] == 2
    done = render_stream_chunk(StreamEvent(kind="done", result=_result()), request_id="r", model="m")
    assert done["choices"][0]["finish_reason"] == "tool_calls"
    assert done["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_anthropic_body_moves_system_out_and_merges_tool_results_into_user_turns() -> None:
    request = CONVERSATION.model_copy(
        update={
            "messages": (
                *CONVERSATION.messages[:3],
                ChatMessage(role="tool", tool_call_id="call_1", content="sunny"),
                ChatMessage(role="tool", tool_call_id="call_2", content="rain"),
                CONVERSATION.messages[4],
            )
        }
    )
    body = to_anthropic_body(request, "claude-x")
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this and the weather?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris", "days": 3}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "rain"},
                {"type": "text", "text": "Thanks"},
            ],
        },
    ]
    assert body["tools"] == [{"name": "get_weather", "description": "Forecast", "input_schema": TOOL.input_schema}]
    assert (body["temperature"], body["stop_sequences"], body["max_tokens"]) == (1.0, ["END"], 200)


def test_anthropic_response_with_tool_use_becomes_neutral_tool_calls() -> None:
    data = {
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": CALL.arguments},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 7, "output_tokens": 9},
    }
    result = from_anthropic_response(data, "pc", MODELS[3])
    assert result.message == ChatMessage(role="assistant", content="Checking.", tool_calls=(CALL,))
    assert (result.finish_reason, result.usage.input_tokens, result.usage.output_tokens) == ("tool_calls", 7, 9)
    # and the neutral message goes back out in OpenAI form with the same call
    assert parse_chat_request(to_openai_body(ChatRequest(messages=(result.message,)), "x")).messages[0] == (
        result.message
    )
    with pytest.raises(ProviderError):
        from_anthropic_response({"content": "nope"}, "pc", MODELS[3])


async def test_anthropic_provider_sends_version_and_key_headers(provider_server: ProviderServer) -> None:
    provider_server.script("c", Answer("hi", usage=(3, 4), finish="length"))
    deployment = Deployment("pc", "anthropic", provider_server.anthropic_url("c"), "ak-123456", {"x-h": "v"}, 5)
    async with httpx2.AsyncClient() as http:
        result = await AnthropicProvider(http).chat(
            deployment, ChatRequest(messages=CONVERSATION.messages[:2]), MODELS[3]
        )
    [req] = provider_server.requests("c")
    assert (req.headers["x-api-key"], req.headers["anthropic-version"], req.headers["x-h"]) == (
        "ak-123456",
        "2023-06-01",
        "v",
    )
    assert "authorization" not in req.headers
    assert (result.finish_reason, result.usage.output_tokens) == ("length", 4)


async def test_provider_errors_carry_status_and_retry_after(provider_server: ProviderServer) -> None:
    provider_server.script("a", Fail(429, "slow down", retry_after=7), Fail(404, "no such model"))
    deployment = Deployment("pa", "openai_compat", provider_server.openai_url("a"), None, {}, 5)
    request = ChatRequest(messages=(ChatMessage(role="user", content="x"),))
    async with httpx2.AsyncClient() as http:
        provider = OpenAICompatProvider(http)
        with pytest.raises(ProviderError) as first:
            await provider.chat(deployment, request, MODELS[0])
        with pytest.raises(ProviderError) as second:
            await provider.chat(deployment, request, MODELS[0])
    assert (first.value.status, first.value.retryable, first.value.retry_after) == (429, True, 7)
    assert "slow down" in first.value.reason
    assert (second.value.status, second.value.retryable) == (404, False)
    assert "authorization" not in provider_server.requests("a")[0].headers


async def test_unreachable_provider_is_a_retryable_error() -> None:
    deployment = Deployment("gone", "openai_compat", "http://127.0.0.1:9/v1", None, {}, 2)
    async with httpx2.AsyncClient() as http:
        with pytest.raises(ProviderError) as caught:
            await OpenAICompatProvider(http).chat(
                deployment, ChatRequest(messages=CONVERSATION.messages[:1]), MODELS[0]
            )
    assert caught.value.retryable
    assert caught.value.status is None


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": formatdate(1_000_030, usegmt=True)}, now=1_000_000) == 30
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(429, True), (500, True), (529, True), (408, True), (400, False), (401, False), (404, False)],
)
def test_status_classification(status: int, retryable: bool) -> None:
    error = error_from_response("p", status, {}, b'{"error": {"message": "m"}}')
    assert error.retryable is retryable
    assert error.reason == f"HTTP {status}: m"


async def test_dispatch_table_loads_each_family_and_refuses_unknown() -> None:
    async with httpx2.AsyncClient() as http:
        assert {type(load_provider(api, http)).__name__ for api in PROVIDERS} == {
            "AnthropicProvider",
            "OpenAICompatProvider",
        }
        with pytest.raises(ConfigError):
            load_provider("palm", http)
