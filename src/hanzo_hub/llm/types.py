"""The gateway's vocabulary: provider-neutral messages, requests, results and stream events.

Every provider module translates between these and its wire format; the MCP surface, sampling fulfilment, the
OpenAI-compatible HTTP endpoint and the tool-selection LLM filter speak only these.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Caller",
    "ChatMessage",
    "ChatRequest",
    "ChatResult",
    "Completer",
    "ImagePart",
    "StreamEvent",
    "TextPart",
    "ToolCall",
    "ToolSpec",
    "Usage",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Frozen):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_Frozen):
    type: Literal["image"] = "image"
    data: str = Field(description="base64")
    mime_type: str


class ToolCall(_Frozen):
    """A model's request to call a tool."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolSpec(_Frozen):
    """A tool offered to the model (an MCP tool definition, provider-neutral)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class ChatMessage(_Frozen):
    """One message. ``tool`` messages answer ``tool_call_id``; assistant messages may carry ``tool_calls``."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[TextPart | ImagePart] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def text(self) -> str:
        """The message's text parts joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


class Caller(_Frozen):
    """Who a request is for: costs, budgets and rate limits are kept per user and project."""

    user: str
    project: str | None = None


class ChatRequest(_Frozen):
    """A chat completion request. ``model=None`` lets the router choose under ``policy``."""

    messages: tuple[ChatMessage, ...]
    model: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = Field(default=1024, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    stop: tuple[str, ...] = ()
    policy: Literal["quality_first", "balanced", "cost_first", "pinned"] = "balanced"
    max_cost: float | None = Field(default=None, ge=0, description="USD for this request")
    max_latency_ms: float | None = Field(default=None, ge=0)


class Usage(_Frozen):
    input_tokens: int = 0
    output_tokens: int = 0


class ChatResult(_Frozen):
    """An answer, with what it cost and why that model answered."""

    model: str
    provider: str
    message: ChatMessage
    finish_reason: Literal["stop", "length", "tool_calls", "error"] = "stop"
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    attempts: int = 1
    reason: str = Field(default="", description="why this model: routing decision, failover, pin")
    request_id: str = ""


class StreamEvent(_Frozen):
    """A streamed piece: text deltas, then one ``done`` event carrying the full :class:`ChatResult`."""

    kind: Literal["text", "tool_call", "done"]
    text: str = ""
    tool_call: ToolCall | None = None
    result: ChatResult | None = None


class Completer(Protocol):
    """What callers of the gateway depend on (the gateway, or the client's own model through sampling)."""

    async def chat(self, request: ChatRequest, *, caller: Caller) -> ChatResult: ...

    def stream(self, request: ChatRequest, *, caller: Caller) -> AsyncIterator[StreamEvent]: ...
