"""The hub's own ``llm`` server: routed completion as MCP tools and resources, served in process.

Tools: ``complete`` (one routed completion; the result names the model, provider, cost, usage, the routing reason
and a request id), ``chat`` (the whole seed pipeline in one call: ``hub/chat.py``) and ``feedback`` (rate a
request id: the router learns from it). Resources: ``llm://models`` (the routable models, whether their provider
is configured, and the router's state: ratings learned from, the balanced policy's pacer price) and
``llm://usage`` (the asking user's spend by model, project and day).

It is mounted like the memory server (``hub/memory_mount.py``): started on first use, with the hub stamping who is
asking (user, project, session) into each forwarded request's ``_meta``; anything a client put there is overwritten.
Without a provider the tools still list and answer a clear error (``NO_PROVIDER``); ``complete`` first tries the
client's own model through sampling, when the client can sample.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Annotated, Any, Literal

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.message import ServerMessageMetadata
from pydantic import Field

from hanzo_hub.errors import HubError
from hanzo_hub.hub.chat import ChatPipeline, ChatTurn
from hanzo_hub.hub.identity import Acting
from hanzo_hub.hub.llm_runtime import NO_PROVIDER, LlmRuntime
from hanzo_hub.hub.memory_mount import DEFAULT_PROJECT, PROJECT_KEY, SESSION_KEY, USER_KEY
from hanzo_hub.llm.ratings import Rating, fingerprint, quality_of
from hanzo_hub.llm.types import Caller, ChatMessage, ChatRequest, ChatResult

__all__ = ["LLM_SERVER", "build_llm_server", "chat_messages", "result_fields"]

LLM_SERVER = "llm"
CLIENT_SAMPLING_TIMEOUT = 120.0
"""Bound on the client's answer when ``complete`` falls back to the client's model."""
Policy = Literal["quality_first", "balanced", "cost_first"]


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def result_fields(result: ChatResult) -> dict[str, Any]:
    """The structured part of a completion's answer."""
    return {
        "model": result.model,
        "provider": result.provider,
        "cost_usd": result.cost_usd,
        "reason": result.reason,
        "usage": result.usage.model_dump(),
        "request_id": result.request_id,
        "finish_reason": result.finish_reason,
    }


def chat_messages(items: list[dict[str, Any]] | None) -> tuple[ChatMessage, ...]:
    """``[{role, content}]`` from a client as gateway messages.

    Raises:
        ValueError: a role other than system/user/assistant, or content that is not text.
    """
    out = []
    for item in items or ():
        role, content = item.get("role"), item.get("content", "")
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise ValueError("each message needs role system|user|assistant and text content")
        out.append(ChatMessage(role=role, content=content))
    return tuple(out)


_request_meta: ContextVar[dict[str, Any] | None] = ContextVar("hanzo_hub_llm_request_meta", default=None)


async def _remember_meta(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
    """Middleware keeping the request's ``_meta`` at hand for handlers without a context (static resources)."""
    token = _request_meta.set(dict((ctx.params or {}).get("_meta") or {}))
    try:
        return await call_next(ctx)
    finally:
        _request_meta.reset(token)


def _who(ctx: Context[Any, Any] | None, local_user: str) -> Acting:
    meta: dict[str, Any] = dict(ctx.request_context.meta or {}) if ctx is not None else _request_meta.get() or {}
    return Acting(
        user=str(meta.get(USER_KEY) or local_user),
        project=str(meta.get(PROJECT_KEY) or DEFAULT_PROJECT),
        session=str(meta.get(SESSION_KEY) or "default"),
    )


def build_llm_server(hub: Any, runtime: LlmRuntime) -> MCPServer:
    """The ``llm`` server for ``hub`` (anything with ``call_tool``, ``list_tools``, ``registry``, ``settings``)."""
    mcp: MCPServer = MCPServer(
        LLM_SERVER, instructions="Routed LLM completion: complete, chat, feedback.", middleware=[_remember_meta]
    )
    local_user: str = hub.settings.user
    _register_complete(mcp, runtime, local_user)
    _register_chat(mcp, runtime, ChatPipeline(hub, runtime, LLM_SERVER), local_user)
    _register_feedback(mcp, runtime, local_user)
    _register_resources(mcp, runtime, local_user)
    return mcp


def _register_complete(mcp: MCPServer, runtime: LlmRuntime, local_user: str) -> None:
    @mcp.tool(description="One LLM completion, routed to a model by cost and quality unless 'model' is given.")
    async def complete(
        ctx: Context[Any, Any],
        prompt: str | None = None,
        messages: list[dict[str, Any]] | None = None,
        system: str | None = None,
        model: str | None = None,
        policy: Policy = "balanced",
        max_tokens: Annotated[int, Field(ge=1, le=100_000)] = 1024,
        temperature: Annotated[float | None, Field(ge=0, le=2)] = None,
        max_cost: Annotated[float | None, Field(ge=0)] = None,
    ) -> types.CallToolResult:
        who = _who(ctx, local_user)
        try:
            history = chat_messages(messages)
        except ValueError as exc:
            return _error(f"bad 'messages': {exc}")
        head = (ChatMessage(role="system", content=system),) if system else ()
        tail = (ChatMessage(role="user", content=prompt),) if prompt else ()
        if not history and not tail:
            return _error("give 'prompt' or 'messages'")
        request = ChatRequest(
            messages=(*head, *history, *tail), model=model, policy=policy, max_tokens=max_tokens,
            temperature=temperature, max_cost=max_cost,
        )  # fmt: skip
        if not runtime.available:
            return await _complete_by_client(ctx, request)
        try:
            result = await runtime.chat(
                request, Caller(user=who.user, project=who.project), asked=fingerprint(request.messages)
            )
        except HubError as exc:
            return _error(f"completion failed: {exc}")
        text = types.TextContent(type="text", text=result.message.text())
        return types.CallToolResult(content=[text], structured_content=result_fields(result))


async def _complete_by_client(ctx: Context[Any, Any], request: ChatRequest) -> types.CallToolResult:
    """Without a provider, ``complete`` asks the client's own model (sampling, relayed by the hub to the client).

    The hub talks to this server in the handshake era, so the request rides the client's call; a client that
    cannot sample gets ``NO_PROVIDER``.
    """
    system = "\n".join(m.text() for m in request.messages if m.role == "system") or None
    messages = [
        types.SamplingMessage(role=m.role, content=types.TextContent(type="text", text=m.text()))
        for m in request.messages
        if m.role in ("user", "assistant")
    ]
    params = types.CreateMessageRequestParams(
        messages=messages, system_prompt=system, max_tokens=request.max_tokens, temperature=request.temperature
    )
    metadata = ServerMessageMetadata(related_request_id=ctx.request_context.request_id)
    try:
        with anyio.fail_after(CLIENT_SAMPLING_TIMEOUT):
            answer = await ctx.session.send_request(
                types.CreateMessageRequest(params=params), types.CreateMessageResult, metadata=metadata
            )
    except (MCPError, TimeoutError):
        return _error(f"{NO_PROVIDER} (and the client did not answer a sampling request)")
    text = answer.content.text if isinstance(answer.content, types.TextContent) else ""
    structured = {
        "model": answer.model,
        "provider": "client",
        "cost_usd": 0.0,
        "reason": "client sampling (no provider configured)",
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "request_id": "",
        "finish_reason": "length" if answer.stop_reason == "maxTokens" else "stop",
    }
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)


def _register_chat(mcp: MCPServer, runtime: LlmRuntime, pipeline: ChatPipeline, local_user: str) -> None:
    @mcp.tool(
        description="Chat in one call: recalls your memories, picks tools from the hub, routes to a model, runs the "
        "tools it asks for (at most 25), answers, and remembers the exchange."
    )
    async def chat(
        message: str,
        ctx: Context[Any, Any],
        history: list[dict[str, Any]] | None = None,
        model: str | None = None,
        policy: Policy = "balanced",
        max_tokens: Annotated[int | None, Field(ge=1, le=100_000)] = None,
        use_tools: bool = True,
        use_memory: bool = True,
    ) -> types.CallToolResult:
        if not runtime.available:
            return _error(NO_PROVIDER)
        try:
            turn = ChatTurn(message, chat_messages(history), model, policy, max_tokens, use_tools, use_memory)
        except ValueError as exc:
            return _error(f"bad 'history': {exc}")
        try:
            outcome = await pipeline.run(turn, _who(ctx, local_user))
        except HubError as exc:
            return _error(f"chat failed: {exc}")
        structured = {
            **result_fields(outcome.result),
            "answer": outcome.answer,
            "cost_usd": outcome.cost_usd,
            "usage": outcome.usage.model_dump(),
            "tool_calls": outcome.tool_calls,
            "tools_offered": outcome.tools_offered,
            "memories_recalled": outcome.memories,
            "remembered": outcome.remembered,
            "budget": outcome.budget,
        }
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.answer)], structured_content=structured
        )


def _register_feedback(mcp: MCPServer, runtime: LlmRuntime, local_user: str) -> None:
    @mcp.tool(
        description="Rate an answer by its request_id, once: a number from 0 (bad) to 1 (good), or 'regenerated'."
    )
    async def feedback(request_id: str, rating: Rating, ctx: Context[Any, Any]) -> types.CallToolResult:
        quality = quality_of(rating)
        try:
            model = await runtime.planner.feedback(request_id, quality, _who(ctx, local_user).user)
        except HubError as exc:
            return _error(str(exc))
        text = f"thanks: {model} rated {quality:g}"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content={"request_id": request_id, "model": model, "quality": quality},
        )


def _register_resources(mcp: MCPServer, runtime: LlmRuntime, local_user: str) -> None:
    @mcp.resource("llm://models", mime_type="application/json", description="Routable models and their prices.")
    async def models() -> str:
        configured = runtime.settings.llm.providers
        candidates = {m.id for m in runtime.planner.candidates()}
        rows = [
            {**m.model_dump(mode="json"), "configured": m.provider in configured, "routed": m.id in candidates}
            for m in runtime.registry
        ]
        return json.dumps({"models": rows, "router": runtime.planner.describe()}, sort_keys=True)

    @mcp.resource("llm://usage", mime_type="application/json", description="Your LLM spend by model, project, day.")
    async def usage() -> str:
        return json.dumps(await runtime.usage_of(_who(None, local_user).user), sort_keys=True)
