"""Anthropic Messages (``POST <base_url>/v1/messages``), translated to and from the neutral vocabulary.

System messages become the ``system`` parameter; tool results become ``tool_result`` blocks in a user turn;
consecutive turns of one role are merged, since the API wants user and assistant to alternate. Streams are the
``message_start`` / ``content_block_*`` / ``message_delta`` / ``message_stop`` SSE events.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2

from hanzo_hub.llm.providers.base import (
    Deployment,
    error_from_response,
    invalid_response,
    map_http_errors,
    post_json,
)
from hanzo_hub.llm.registry import ModelSpec
from hanzo_hub.llm.types import (
    ChatMessage,
    ChatRequest,
    ChatResult,
    StreamEvent,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider", "from_anthropic_response", "to_anthropic_body"]

ANTHROPIC_VERSION = "2023-06-01"
FinishReason = Literal["stop", "length", "tool_calls", "error"]
_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "pause_turn": "stop",
    "refusal": "stop",
}


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        block = {"type": "tool_result", "tool_use_id": message.tool_call_id or "", "content": message.text()}
        return [block]
    blocks: list[dict[str, Any]] = []
    if isinstance(message.content, str):
        if message.content:
            blocks.append({"type": "text", "text": message.content})
    else:
        for part in message.content:
            if isinstance(part, TextPart):
                blocks.append({"type": "text", "text": part.text})
            else:
                source = {"type": "base64", "media_type": part.mime_type, "data": part.data}
                blocks.append({"type": "image", "source": source})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in message.tool_calls]
    return blocks


def to_anthropic_messages(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)``: system text joined, the rest as alternating user/assistant turns of blocks."""
    system = "\n\n".join(m.text() for m in messages if m.role == "system")
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}


def to_anthropic_body(request: ChatRequest, model: str, *, stream: bool = False) -> dict[str, Any]:
    """The ``/v1/messages`` request body."""
    system, messages = to_anthropic_messages(request.messages)
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "messages": messages}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = min(request.temperature, 1.0)  # Anthropic's range is 0-1
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if stream:
        body["stream"] = True
    return body


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    return Usage(input_tokens=int(raw.get("input_tokens") or 0), output_tokens=int(raw.get("output_tokens") or 0))


def from_anthropic_response(data: Any, provider: str, model: ModelSpec) -> ChatResult:
    """A Messages API response as a :class:`ChatResult`.

    Raises:
        ProviderError: the response has no readable content (retryable).
    """
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise invalid_response(provider, "no 'content' list")
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in data["content"]:
        if not isinstance(block, dict):
            raise invalid_response(provider, "a content block is not an object")
        if block.get("type") == "text":
            text.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            args = block.get("input") or {}
            if not isinstance(args, dict):
                raise invalid_response(provider, "tool_use input is not an object")
            calls.append(ToolCall(id=str(block.get("id", "")), name=str(block.get("name", "")), arguments=args))
    message = ChatMessage(role="assistant", content="".join(text), tool_calls=tuple(calls))
    finish = _STOP.get(str(data.get("stop_reason")), "stop")
    return ChatResult(
        model=model.id, provider=provider, message=message, finish_reason=finish, usage=_usage(data.get("usage"))
    )


@dataclass
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    blocks: dict[int, _Block] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    finish: FinishReason | None = None
    stopped: bool = False

    def feed(self, event: Mapping[str, Any]) -> StreamEvent | None:
        """Fold one event in; returns the neutral event it completes, if any."""
        kind = event.get("type")
        if kind == "message_start":
            self.input_tokens = _usage(event.get("message", {}).get("usage")).input_tokens
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self.blocks[int(event.get("index", 0))] = _Block(
                str(block.get("type")), str(block.get("id", "")), str(block.get("name", ""))
            )
        elif kind == "content_block_delta":
            return self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "content_block_stop":
            return self._stop(int(event.get("index", 0)))
        elif kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason")
            self.finish = _STOP.get(str(stop), "stop") if stop else self.finish
            self.output_tokens = _usage(event.get("usage")).output_tokens or self.output_tokens
        elif kind == "message_stop":
            self.stopped = True
        return None

    def _delta(self, index: int, delta: Mapping[str, Any]) -> StreamEvent | None:
        block = self.blocks.setdefault(index, _Block("text"))
        if delta.get("type") == "text_delta":
            text = str(delta.get("text", ""))
            self.text.append(text)
            return StreamEvent(kind="text", text=text) if text else None
        if delta.get("type") == "input_json_delta":
            block.parts.append(str(delta.get("partial_json", "")))
        return None

    def _stop(self, index: int) -> StreamEvent | None:
        block = self.blocks.get(index)
        if block is None or block.kind != "tool_use":
            return None
        raw = "".join(block.parts)
        args = json.loads(raw) if raw else {}
        if not isinstance(args, dict):
            raise ValueError("tool_use input is not an object")
        call = ToolCall(id=block.id, name=block.name, arguments=args)
        self.calls.append(call)
        return StreamEvent(kind="tool_call", tool_call=call)


class AnthropicProvider:
    """``POST <base_url>/v1/messages`` with ``x-api-key`` and ``anthropic-version``."""

    api = "anthropic"

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self._http = http

    def _headers(self, deployment: Deployment) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION, **deployment.headers}
        if deployment.api_key:
            headers["x-api-key"] = deployment.api_key
        return headers

    async def chat(self, deployment: Deployment, request: ChatRequest, model: ModelSpec) -> ChatResult:
        """One non-streamed attempt (see :class:`~hanzo_hub.llm.providers.base.Provider`)."""
        body = to_anthropic_body(request, model.wire_name)
        data = await post_json(self._http, deployment, "v1/messages", body, self._headers(deployment))
        return from_anthropic_response(data, deployment.name, model)

    async def stream(
        self, deployment: Deployment, request: ChatRequest, model: ModelSpec
    ) -> AsyncIterator[StreamEvent]:
        """One streamed attempt (see :class:`~hanzo_hub.llm.providers.base.Provider`)."""
        body = to_anthropic_body(request, model.wire_name, stream=True)
        state = _StreamState()
        with map_http_errors(deployment.name):
            async with self._http.stream(
                "POST",
                deployment.url("v1/messages"),
                json=body,
                headers=self._headers(deployment),
                timeout=deployment.timeout,
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise error_from_response(deployment.name, response.status_code, response.headers, response.content)
                async for sse in httpx2.EventSource(response):
                    event = _event(sse.data, deployment.name)
                    try:
                        out = state.feed(event)
                    except ValueError as exc:
                        raise invalid_response(deployment.name, "streamed tool input is not a JSON object") from exc
                    if out is not None:
                        yield out
                    if state.stopped:
                        break
        if not state.stopped:
            raise invalid_response(deployment.name, "the stream ended before message_stop")
        calls = tuple(state.calls)
        message = ChatMessage(role="assistant", content="".join(state.text), tool_calls=calls)
        usage = Usage(input_tokens=state.input_tokens, output_tokens=state.output_tokens)
        finish = state.finish or ("tool_calls" if calls else "stop")
        result = ChatResult(
            model=model.id, provider=deployment.name, message=message, finish_reason=finish, usage=usage
        )
        yield StreamEvent(kind="done", result=result)


def _event(data: str, provider: str) -> Mapping[str, Any]:
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise invalid_response(provider, "a stream event is not JSON") from exc
    if not isinstance(event, dict):
        raise invalid_response(provider, "a stream event is not an object")
    if event.get("type") == "error":
        error = event.get("error") or {}
        overloaded = error.get("type") == "overloaded_error"
        raise error_from_response(provider, 529 if overloaded else 500, {}, data.encode())
    return event
