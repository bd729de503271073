"""OpenAI-compatible chat completions (OpenAI, Together, Groq, vLLM, Ollama, OpenRouter...), both ways.

Client side: :class:`OpenAICompatProvider` sends ``POST <base_url>/chat/completions`` and reads the answer, or its
SSE stream (``stream_options.include_usage`` asks for the final usage chunk). Server side, for an
OpenAI-compatible endpoint in front of the gateway: :func:`parse_chat_request` reads a request body into a
:class:`ChatRequest`, :func:`render_chat_response` and :func:`render_stream_chunk` write answers back.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
from pydantic import ValidationError

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
    ImagePart,
    StreamEvent,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "OpenAICompatProvider",
    "from_openai_message",
    "parse_chat_request",
    "render_chat_response",
    "render_stream_chunk",
    "to_openai_body",
    "to_openai_messages",
]

FinishReason = Literal["stop", "length", "tool_calls", "error"]
_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "stop",
}

# ---- neutral -> OpenAI ----


def _content(message: ChatMessage) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        else:
            url = f"data:{part.mime_type};base64,{part.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def to_openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Neutral messages as OpenAI chat messages (tool calls with JSON-string arguments)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.text()})
            continue
        entry: dict[str, Any] = {"role": m.role, "content": _content(m)}
        if m.tool_calls:
            entry["content"] = m.text() or None
            entry["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in m.tool_calls
            ]
        out.append(entry)
    return out


def _tool(spec: ToolSpec) -> dict[str, Any]:
    function = {"name": spec.name, "description": spec.description, "parameters": spec.input_schema}
    return {"type": "function", "function": function}


def to_openai_body(request: ChatRequest, model: str, *, stream: bool = False) -> dict[str, Any]:
    """The ``/chat/completions`` request body."""
    body: dict[str, Any] = {
        "model": model,
        "messages": to_openai_messages(request.messages),
        "max_tokens": request.max_tokens,
    }
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop:
        body["stop"] = list(request.stop)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


# ---- OpenAI -> neutral ----


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, dict):
        raise ValueError("tool call arguments are not a JSON object")
    return value


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError("'tool_calls' must be a list")
    calls = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ValueError("a tool call needs 'function.name'")
        calls.append(
            ToolCall(
                id=str(item.get("id") or ""), name=function["name"], arguments=_arguments(function.get("arguments"))
            )
        )
    return tuple(calls)


def _image(url: str) -> ImagePart:
    head, sep, data = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise ValueError("image_url must be a base64 data: URL")
    return ImagePart(data=data, mime_type=head[5:-7])


def _parts(raw: Any) -> str | list[TextPart | ImagePart]:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise ValueError("message 'content' must be a string or a list of parts")
    parts: list[TextPart | ImagePart] = []
    for part in raw:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(TextPart(text=part["text"]))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise ValueError("an image_url part needs 'image_url.url'")
            parts.append(_image(url))
        else:
            raise ValueError(f"unsupported content part type {kind!r}")
    return parts


def from_openai_message(raw: Mapping[str, Any]) -> ChatMessage:
    """One OpenAI chat message as a neutral message (``developer`` is read as ``system``).

    Raises:
        ValueError: the message is malformed.
    """
    role = raw.get("role")
    role = "system" if role == "developer" else role
    if role not in ("system", "user", "assistant", "tool"):
        raise ValueError(f"unsupported message role {role!r}")
    if role == "tool" and not isinstance(raw.get("tool_call_id"), str):
        raise ValueError("a tool message needs 'tool_call_id'")
    return ChatMessage(
        role=role,
        content=_parts(raw.get("content")),
        tool_calls=_tool_calls(raw.get("tool_calls")) if role == "assistant" else (),
        tool_call_id=raw.get("tool_call_id") if role == "tool" else None,
    )


def _parse_tools(raw: Any) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError("'tools' must be a list")
    tools = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ValueError("each tool needs 'function.name'")
        schema = function.get("parameters") or {"type": "object"}
        tools.append(
            ToolSpec(name=function["name"], description=function.get("description") or "", input_schema=schema)
        )
    return tuple(tools)


def parse_chat_request(body: Any) -> ChatRequest:
    """An OpenAI ``/chat/completions`` request body as a :class:`ChatRequest` (``stream`` is the caller's to read).

    Raises:
        ValueError: the body is not a valid chat completion request; the message says which field and why.
    """
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError("'model' must be a string")
    stop = body.get("stop")
    stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if not all(isinstance(m, dict) for m in messages):
        raise ValueError("each message must be a JSON object")
    fields: dict[str, Any] = {
        "messages": tuple(from_openai_message(m) for m in messages),
        "model": model or None,
        "tools": _parse_tools(body.get("tools")),
        "temperature": body.get("temperature"),
        "stop": stops,
    }
    if max_tokens is not None:
        fields["max_tokens"] = max_tokens
    try:
        return ChatRequest(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"invalid request field '{where}': {first['msg']}") from None


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    return Usage(input_tokens=int(raw.get("prompt_tokens") or 0), output_tokens=int(raw.get("completion_tokens") or 0))


def _result(data: Any, provider: str, model: ModelSpec) -> ChatResult:
    try:
        choice = data["choices"][0]
        message = from_openai_message({**choice["message"], "role": "assistant"})
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise invalid_response(provider, f"no readable choice ({exc})") from exc
    finish = _FINISH.get(str(choice.get("finish_reason")), "stop")
    return ChatResult(
        model=model.id, provider=provider, message=message, finish_reason=finish, usage=_usage(data.get("usage"))
    )


# ---- server side: neutral -> OpenAI responses ----


def _extension(result: ChatResult) -> dict[str, Any]:
    return {
        "provider": result.provider,
        "cost_usd": result.cost_usd,
        "attempts": result.attempts,
        "reason": result.reason,
        "latency_ms": result.latency_ms,
    }


def _finish_out(reason: str) -> str:
    return "stop" if reason == "error" else reason


def render_chat_response(result: ChatResult, *, created: int | None = None) -> dict[str, Any]:
    """A ``chat.completion`` object for ``result``; what the gateway knows extra goes under ``hanzo``."""
    message = to_openai_messages([result.message])[0]
    usage = result.usage
    return {
        "id": result.request_id or "chatcmpl-hanzo",
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": result.model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_out(result.finish_reason)}],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
        "hanzo": _extension(result),
    }


def render_stream_chunk(
    event: StreamEvent, *, request_id: str, model: str, created: int | None = None, tool_index: int = 0
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` for one stream event (``tool_index``: the call's position in the answer).

    The ``done`` event becomes the final chunk: empty delta, ``finish_reason`` and ``usage``.
    """
    chunk: dict[str, Any] = {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()) if created is None else created,
        "model": model,
    }
    delta: dict[str, Any] = {}
    finish: str | None = None
    if event.kind == "text":
        delta = {"content": event.text}
    elif event.kind == "tool_call" and event.tool_call is not None:
        call = event.tool_call
        function = {"name": call.name, "arguments": json.dumps(call.arguments)}
        delta = {"tool_calls": [{"index": tool_index, "id": call.id, "type": "function", "function": function}]}
    elif event.kind == "done" and event.result is not None:
        result = event.result
        finish = _finish_out(result.finish_reason)
        chunk["model"] = result.model
        chunk["usage"] = {
            "prompt_tokens": result.usage.input_tokens,
            "completion_tokens": result.usage.output_tokens,
            "total_tokens": result.usage.input_tokens + result.usage.output_tokens,
        }
        chunk["hanzo"] = _extension(result)
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return chunk


# ---- the provider ----


@dataclass
class _StreamState:
    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish: FinishReason | None = None
    usage: Usage = field(default_factory=Usage)

    def feed(self, chunk: Mapping[str, Any]) -> str:
        """Fold one chunk in; returns its text delta."""
        if isinstance(chunk.get("usage"), dict):
            self.usage = _usage(chunk["usage"])
        choices = chunk.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish = _FINISH.get(str(choice["finish_reason"]), "stop")
        delta = choice.get("delta") or {}
        for part in delta.get("tool_calls") or ():
            call = self.calls.setdefault(int(part.get("index", 0)), {"id": "", "name": "", "arguments": ""})
            function = part.get("function") or {}
            call["id"] = part.get("id") or call["id"]
            call["name"] = function.get("name") or call["name"]
            call["arguments"] += function.get("arguments") or ""
        text = delta.get("content") or ""
        self.text.append(text)
        return str(text)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=_arguments(c["arguments"]))
            for _, c in sorted(self.calls.items())
        )


class OpenAICompatProvider:
    """``POST <base_url>/chat/completions`` with ``Authorization: Bearer <key>``."""

    api = "openai_compat"

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self._http = http

    def _headers(self, deployment: Deployment) -> dict[str, str]:
        headers = dict(deployment.headers)
        if deployment.api_key:
            headers["authorization"] = f"Bearer {deployment.api_key}"
        return headers

    async def chat(self, deployment: Deployment, request: ChatRequest, model: ModelSpec) -> ChatResult:
        """One non-streamed attempt (see :class:`~hanzo_hub.llm.providers.base.Provider`)."""
        body = to_openai_body(request, model.wire_name)
        data = await post_json(self._http, deployment, "chat/completions", body, self._headers(deployment))
        return _result(data, deployment.name, model)

    async def stream(
        self, deployment: Deployment, request: ChatRequest, model: ModelSpec
    ) -> AsyncIterator[StreamEvent]:
        """One streamed attempt (see :class:`~hanzo_hub.llm.providers.base.Provider`)."""
        body = to_openai_body(request, model.wire_name, stream=True)
        state = _StreamState()
        done = False
        with map_http_errors(deployment.name):
            async with self._http.stream(
                "POST",
                deployment.url("chat/completions"),
                json=body,
                headers=self._headers(deployment),
                timeout=deployment.timeout,
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise error_from_response(deployment.name, response.status_code, response.headers, response.content)
                async for sse in httpx2.EventSource(response):
                    if sse.data.strip() == "[DONE]":
                        done = True
                        break
                    chunk = _chunk(sse.data, deployment.name)
                    if text := state.feed(chunk):
                        yield StreamEvent(kind="text", text=text)
        if not done and state.finish is None:
            raise invalid_response(deployment.name, "the stream ended before its last chunk")
        async for event in _finish_stream(state, deployment.name, model):
            yield event


def _chunk(data: str, provider: str) -> Mapping[str, Any]:
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise invalid_response(provider, "a stream chunk is not JSON") from exc
    if not isinstance(chunk, dict):
        raise invalid_response(provider, "a stream chunk is not an object")
    if "error" in chunk:
        raise error_from_response(provider, 500, {}, data.encode())
    return chunk


async def _finish_stream(state: _StreamState, provider: str, model: ModelSpec) -> AsyncIterator[StreamEvent]:
    try:
        calls = state.tool_calls()
    except ValueError as exc:
        raise invalid_response(provider, "streamed tool call arguments are not a JSON object") from exc
    for call in calls:
        yield StreamEvent(kind="tool_call", tool_call=call)
    message = ChatMessage(role="assistant", content="".join(state.text), tool_calls=calls)
    finish = state.finish or ("tool_calls" if calls else "stop")
    result = ChatResult(model=model.id, provider=provider, message=message, finish_reason=finish, usage=state.usage)
    yield StreamEvent(kind="done", result=result)
