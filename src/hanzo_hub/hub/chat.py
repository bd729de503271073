"""The ``chat`` pipeline: one user turn, from memory to answer, in one call.

1. Recall memories for the message (when memory is enabled), within the memory share of the context.
2. Select the tools for the message from the hub's catalog (the selection pipeline), within the system+tools share.
3. Keep the most recent history that fits the history share.
4. Route and generate; every tool call the model makes goes through the hub's normal call path (policy guard,
   audit, sandbox) as the asking user in the client's session, at most ``MAX_TOOL_CALLS`` per turn; then the model
   gives its final answer. One ``chat`` call is one turn for the guard: its per-turn limit counts these calls (a
   refusal reaches the model as the tool's result), and they spend the client session's budget and the user's rates.
5. Remember the exchange in the project tier, tagged ``chat`` (when memory is enabled), so later turns recall it
   whichever session they come from.

The budget split of the model's context (``BUDGET``): system prompt and tool definitions 20 %, memory 30 %,
history 40 %, answer 10 % (the answer share caps ``max_tokens``). The context is the chosen model's window, or,
when the router chooses, the smallest window among the eligible candidates, so the assembled prompt fits any of them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from hanzo_hub.config import HubSettings
from hanzo_hub.errors import HubError
from hanzo_hub.hub.identity import Acting, acting_as
from hanzo_hub.hub.llm_runtime import LlmRuntime
from hanzo_hub.hub.memory_mount import MEMORY_SERVER
from hanzo_hub.hub.search import ToolSearch
from hanzo_hub.llm.ratings import fingerprint
from hanzo_hub.llm.types import Caller, ChatMessage, ChatRequest, ChatResult, ToolCall, ToolSpec, Usage

__all__ = ["BUDGET", "MAX_TOOL_CALLS", "ChatOutcome", "ChatPipeline", "ChatTurn"]

logger = logging.getLogger(__name__)

BUDGET: dict[str, float] = {"system_tools": 0.20, "memory": 0.30, "history": 0.40, "answer": 0.10}
MAX_TOOL_CALLS = 25
"""Tool calls one ``chat`` turn may make (the seed design's per-turn budget); then the model must answer."""
RESULT_CHARS = 8000
"""A tool result longer than this is cut before it goes back to the model."""
SYSTEM_PROMPT = (
    "You are the assistant of an MCP hub. Use the tools offered when they help; answer directly otherwise. "
    "Relevant memories of this user, if any, follow."
)


@dataclass(frozen=True)
class ChatTurn:
    """What a ``chat`` call asks for."""

    message: str
    history: tuple[ChatMessage, ...] = ()
    model: str | None = None
    policy: str = "balanced"
    max_tokens: int | None = None
    use_tools: bool = True
    use_memory: bool = True


@dataclass
class ChatOutcome:
    """The answer and what it took."""

    answer: str
    result: ChatResult
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    memories: int = 0
    remembered: bool = False
    tools_offered: int = 0
    budget: dict[str, int] = field(default_factory=dict)


def _tokens(text: str) -> int:
    return len(text) // 4 + 1


def _context_window(runtime: LlmRuntime, turn: ChatTurn) -> int:
    if turn.model is not None and turn.model in runtime.registry:
        return runtime.registry[turn.model].context_window
    windows = [m.context_window for m in runtime.planner.candidates()]
    return min(windows) if windows else 8192


def _fit_history(history: Sequence[ChatMessage], budget: int) -> list[ChatMessage]:
    """The most recent messages that fit ``budget`` tokens, in order."""
    kept: list[ChatMessage] = []
    used = 0
    for message in reversed(history):
        cost = _tokens(message.text()) + 4
        if used + cost > budget:
            break
        kept.append(message)
        used += cost
    return kept[::-1]


def _result_text(result: types.CallToolResult | types.InputRequiredResult) -> tuple[str, bool]:
    if not isinstance(result, types.CallToolResult):
        return "the tool needs input from the user, which chat cannot give", True
    parts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    text = "\n".join(parts) or (json.dumps(result.structured_content) if result.structured_content else "")
    return text[:RESULT_CHARS], bool(result.is_error)


class ChatPipeline:
    """Runs ``chat`` turns against a hub (duck-typed: ``call_tool``, ``list_tools``, ``registry``, settings)."""

    def __init__(self, hub: Any, runtime: LlmRuntime, own_server: str) -> None:
        self.hub = hub
        self.runtime = runtime
        self.own_server = own_server
        self.settings: HubSettings = hub.settings
        self._search: ToolSearch | None = None
        self._search_budget = 0

    def _exposed(self, server: str, tool: str) -> str | None:
        for exposed in self.hub.registry.tools():
            target = self.hub.registry.resolve_tool(exposed.name)
            if target.server == server and target.original == tool:
                return str(exposed.name)
        return None

    async def _memory(self, turn: ChatTurn, budget: int) -> list[str]:
        name = self._exposed(MEMORY_SERVER, "recall")
        if not turn.use_memory or name is None:
            return []
        result = await self.hub.call_tool(name, {"query": turn.message, "token_budget": max(1, budget)})
        if not isinstance(result, types.CallToolResult) or result.is_error or not result.structured_content:
            return []
        return [str(item["memory"]["content"]) for item in result.structured_content.get("results", [])]

    async def _tools(self, turn: ChatTurn, budget: int) -> list[types.Tool]:
        if not turn.use_tools:
            return []
        tools = tuple(
            t for t in await self.hub.list_tools() if self.hub.registry.resolve_tool(t.name).server != self.own_server
        )
        if not tools:
            return []
        budget = max(200, budget)
        if self._search is None or self._search_budget != budget:
            exposure = self.settings.exposure.model_copy(update={"token_budget": budget, "core_tools": ()})
            self._search, self._search_budget = ToolSearch(exposure), budget
        _, chosen = await self._search.find(turn.message, tools)
        return chosen

    async def _remember(self, turn: ChatTurn, answer: str) -> bool:
        name = self._exposed(MEMORY_SERVER, "remember")
        if not turn.use_memory or name is None or not answer:
            return False
        content = f"User: {turn.message}\nAssistant: {answer}"
        result = await self.hub.call_tool(name, {"content": content, "tier": "project", "tags": ["chat"]})
        return isinstance(result, types.CallToolResult) and not result.is_error

    async def _call(self, call: ToolCall, who: Acting) -> tuple[str, bool]:
        """One of the model's tool calls, made as ``who`` in its turn (the guard's per-turn unit)."""
        try:
            with acting_as(who.user, who.project, who.session, who.turn):
                result = await self.hub.call_tool(call.name, call.arguments)
        except HubError as exc:  # unknown tool, downstream protocol error: the model hears why
            return f"error: {exc}", True
        except Exception as exc:  # an MCPError from the downstream
            return f"error: {exc}", True
        return _result_text(result)

    async def run(self, turn: ChatTurn, who: Acting) -> ChatOutcome:
        """One turn for ``who``.

        Raises:
            CompletionError: no provider, no eligible model, budget refused, every candidate failed.
        """
        with acting_as(who.user, who.project, who.session):  # memory recall and remember: outside the model's turn
            in_turn = dataclasses.replace(who, turn=f"chat-{uuid.uuid4().hex[:16]}")
            return await self._run(turn, Caller(user=who.user, project=who.project), in_turn)

    async def _run(self, turn: ChatTurn, caller: Caller, who: Acting) -> ChatOutcome:
        window = _context_window(self.runtime, turn)
        shares = {k: int(window * v) for k, v in BUDGET.items()}
        answer_tokens = max(16, min(turn.max_tokens or shares["answer"], shares["answer"]))
        memories = await self._memory(turn, shares["memory"])
        tools = await self._tools(turn, shares["system_tools"] - _tokens(SYSTEM_PROMPT))
        system = SYSTEM_PROMPT + "".join(f"\n- {m}" for m in memories)
        messages = [
            ChatMessage(role="system", content=system),
            *_fit_history(turn.history, shares["history"]),
            ChatMessage(role="user", content=turn.message),
        ]
        specs = tuple(
            ToolSpec(name=t.name, description=t.description or "", input_schema=dict(t.input_schema)) for t in tools
        )
        outcome = await self._loop(turn, caller, who, messages, specs, answer_tokens)
        outcome.memories, outcome.tools_offered = len(memories), len(specs)
        outcome.budget = {**shares, "context": window, "max_tokens": answer_tokens}
        outcome.remembered = await self._remember(turn, outcome.answer)
        return outcome

    async def _loop(
        self,
        turn: ChatTurn,
        caller: Caller,
        who: Acting,
        messages: list[ChatMessage],
        specs: tuple[ToolSpec, ...],
        max_tokens: int,
    ) -> ChatOutcome:
        model, cost = turn.model, 0.0
        calls: list[dict[str, Any]] = []
        tokens_in = tokens_out = 0
        policy: Any = turn.policy
        # the turn as the user asked it (not the recalled memories, which the first answer changes): asking it
        # again rates that answer as regenerated
        asked: str | None = fingerprint(turn.history, "chat", turn.message)
        first = reason = ""
        while True:
            offered = specs if len(calls) < MAX_TOOL_CALLS else ()
            request = ChatRequest(
                messages=tuple(messages), model=model, tools=offered, max_tokens=max_tokens, policy=policy
            )
            result = await self.runtime.chat(request, caller, asked)
            if not first:  # the turn's route: its reason stands for the turn, any step's id rates it
                first, reason = result.request_id, result.reason
            asked = None
            self.runtime.planner.alias(result.request_id, first)
            if result.reason != reason:
                result = result.model_copy(update={"reason": reason})
            model = model or result.model  # the routed model answers the rest of the turn
            cost += result.cost_usd
            tokens_in += result.usage.input_tokens
            tokens_out += result.usage.output_tokens
            pending = list(result.message.tool_calls) if offered else []
            if not pending:
                usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out)
                return ChatOutcome(result.message.text(), result, cost, usage, calls)
            messages.append(result.message)
            for call in pending:
                if len(calls) >= MAX_TOOL_CALLS:
                    text, failed = f"not called: the turn's budget of {MAX_TOOL_CALLS} tool calls is spent", True
                else:
                    text, failed = await self._call(call, who)
                    calls.append({"name": call.name, "arguments": call.arguments, "is_error": failed})
                messages.append(ChatMessage(role="tool", content=text, tool_call_id=call.id))
