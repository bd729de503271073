"""Sampling fulfilment: a downstream server's ``sampling/createMessage`` answered by the hub's own router.

Translates the MCP request into the gateway's vocabulary and the answer back. Model preferences map onto the
routing policy (a hint naming a registry model pins it; intelligence over cost asks for quality, cost over
intelligence for cheapness); tools offered by the server and tool use / tool results in its messages are carried
both ways, so a server can run its own agent loop through the hub.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import mcp_types as types

from hanzo_hub.llm.registry import ModelRegistry
from hanzo_hub.llm.types import ChatMessage, ChatRequest, ChatResult, ImagePart, TextPart, ToolCall, ToolSpec

__all__ = ["to_chat_request", "to_create_message_result"]

PolicyKind = Literal["quality_first", "balanced", "cost_first", "pinned"]


def _policy(prefs: types.ModelPreferences | None, registry: ModelRegistry) -> tuple[str | None, PolicyKind]:
    if prefs is None:
        return None, "balanced"
    for hint in prefs.hints or ():
        if hint.name and hint.name in registry:
            return hint.name, "pinned"
    quality, cost = prefs.intelligence_priority or 0.0, max(prefs.cost_priority or 0.0, prefs.speed_priority or 0.0)
    if quality > cost:
        return None, "quality_first"
    if cost > quality:
        return None, "cost_first"
    return None, "balanced"


def _blocks(content: Any) -> list[Any]:
    return list(content) if isinstance(content, list) else [content]


def _text_of(blocks: list[Any]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, types.TextContent))


def _messages(message: types.SamplingMessage) -> list[ChatMessage]:
    """One sampling message as gateway messages (tool results become ``tool`` messages of their own)."""
    blocks = _blocks(message.content)
    out: list[ChatMessage] = []
    for result in (b for b in blocks if isinstance(b, types.ToolResultContent)):
        text = _text_of(list(result.content)) or json.dumps(result.structured_content or {})
        out.append(ChatMessage(role="tool", content=text, tool_call_id=result.tool_use_id))
    parts: list[TextPart | ImagePart] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, types.ImageContent):
            parts.append(ImagePart(data=block.data, mime_type=block.mime_type))
    calls = tuple(
        ToolCall(id=b.id, name=b.name, arguments=dict(b.input)) for b in blocks if isinstance(b, types.ToolUseContent)
    )
    if parts or calls:
        content: str | list[TextPart | ImagePart] = (
            "".join(p.text for p in parts if isinstance(p, TextPart))
            if all(isinstance(p, TextPart) for p in parts)
            else parts
        )
        out.append(ChatMessage(role=message.role, content=content, tool_calls=calls))
    return out


def to_chat_request(params: types.CreateMessageRequestParams, registry: ModelRegistry) -> ChatRequest:
    """The gateway request for a downstream's sampling request."""
    model, policy = _policy(params.model_preferences, registry)
    messages: list[ChatMessage] = []
    if params.system_prompt:
        messages.append(ChatMessage(role="system", content=params.system_prompt))
    for message in params.messages:
        messages.extend(_messages(message))
    tools = tuple(
        ToolSpec(name=t.name, description=t.description or "", input_schema=dict(t.input_schema))
        for t in params.tools or ()
    )
    temperature = params.temperature if params.temperature is None or 0 <= params.temperature <= 2 else None
    return ChatRequest(
        messages=tuple(messages),
        model=model,
        policy=policy,
        tools=tools,
        max_tokens=max(1, params.max_tokens),
        temperature=temperature,
        stop=tuple(params.stop_sequences or ()),
    )


def to_create_message_result(
    result: ChatResult, *, with_tools: bool
) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
    """The sampling answer for the gateway's result (tool calls only when the server offered tools)."""
    stop = {"stop": "endTurn", "length": "maxTokens", "tool_calls": "toolUse", "error": "endTurn"}[result.finish_reason]
    meta = {"dev.hanzo-hub/llm": {"provider": result.provider, "cost_usd": result.cost_usd, "reason": result.reason}}
    text = types.TextContent(type="text", text=result.message.text())
    if not with_tools:
        return types.CreateMessageResult(
            role="assistant", content=text, model=result.model, stop_reason=stop, _meta=meta
        )
    blocks: list[Any] = [text] if text.text else []
    blocks += [
        types.ToolUseContent(type="tool_use", id=c.id, name=c.name, input=dict(c.arguments))
        for c in result.message.tool_calls
    ]
    return types.CreateMessageResultWithTools(
        role="assistant", content=blocks or [text], model=result.model, stop_reason=stop, _meta=meta
    )
