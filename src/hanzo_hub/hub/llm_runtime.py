"""The hub's routed completion at run time: the gateway, the route planner, and what they answer for.

One object per hub, shared by the ``llm`` server's tools, sampling fulfilment (``hub/relay.py``) and the
OpenAI-compatible endpoint. The gateway is built when the hub runs and only when a provider is configured; without
one every entry point answers ``NO_PROVIDER`` instead of failing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types

from hanzo_hub.config import HubSettings
from hanzo_hub.errors import CompletionError, HubError
from hanzo_hub.hub.llm_route import CascadePlan, RoutePlanner
from hanzo_hub.hub.sampling import to_chat_request, to_create_message_result
from hanzo_hub.llm.registry import ModelRegistry, load_registry
from hanzo_hub.llm.types import Caller, ChatRequest, ChatResult, Completer, StreamEvent

__all__ = ["NO_PROVIDER", "LlmRuntime", "wants_llm"]

logger = logging.getLogger(__name__)

NO_PROVIDER = "no LLM provider configured; see docs/llm.md"


def wants_llm(settings: HubSettings) -> bool:
    """Whether the hub serves the ``llm`` tools: a provider is configured, or ``llm.enabled`` was set explicitly.

    (Left at its default, ``enabled`` alone does not add a server, so a hub without providers lists what it
    always listed.)
    """
    llm = settings.llm
    return llm.enabled and (bool(llm.providers) or "enabled" in llm.model_fields_set)


class LlmRuntime:
    """Routed completion for the hub's users; ``running()`` holds the gateway's lifetime."""

    def __init__(self, settings: HubSettings) -> None:
        self.settings = settings
        self.registry: ModelRegistry = load_registry(settings.llm.models)
        self.planner = RoutePlanner(settings, self.registry)
        self.completer: Completer | None = None
        self.ledger: Any = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LlmRuntime]:
        """Build the gateway (when a provider is configured) for the duration of the block."""
        if not self.settings.llm.providers:
            yield self
            return
        from hanzo_hub.hub.llm_gateway import open_gateway

        async with contextlib.AsyncExitStack() as stack:
            try:
                gateway, ledger = await stack.enter_async_context(open_gateway(self.settings, self.planner.route))
            except HubError as exc:  # a bad key or model entry leaves the hub up, without completion
                logger.error("the LLM gateway could not start, completion is off: %s", exc)
                yield self
                return
            self.completer, self.ledger = gateway, ledger
            try:
                yield self
            finally:
                self.completer, self.ledger = None, None
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await self.planner.close()

    @property
    def available(self) -> bool:
        """Whether a completion can be made (a provider is configured and the gateway is up)."""
        return self.completer is not None

    def _completer(self) -> Completer:
        if self.completer is None:
            raise CompletionError(NO_PROVIDER)
        return self.completer

    async def chat(self, request: ChatRequest, caller: Caller, asked: str | None = None) -> ChatResult:
        """A routed completion for ``caller``; the routing decision is kept for ``feedback``.

        ``asked`` is the request's fingerprint (:func:`hanzo_hub.llm.ratings.fingerprint`) where the same request
        sent again means the user did not take the answer: an earlier, unrated answer to it within
        ``llm.router.regeneration_window`` is rated 0 first, and the reason says so. ``None`` (sampling, a turn's
        later steps): no such reading.

        Raises:
            CompletionError: no provider, no eligible model, budget refused, every candidate failed.
        """
        completer = self._completer()
        note = await self._regeneration(asked, caller.user)
        plan = await self.planner.cascade_plan(request)
        if plan is not None:
            return _noted(await self._cascade(completer, plan, request, caller, asked), note)
        with self.planner.deciding() as decided:
            result = await completer.chat(request, caller=caller)
        self.planner.remember(result.request_id, decided.decision, caller.user, asked)
        if not result.reason and decided.reason:
            result = result.model_copy(update={"reason": decided.reason})
        return _noted(result, note)

    async def _regeneration(self, asked: str | None, user: str) -> str:
        """Rate the answer ``user`` is asking again for 0 ('regenerated'); a note for the new answer's reason."""
        earlier = self.planner.regenerated(user, asked)
        if earlier is None:
            return ""
        request_id, ago = earlier
        try:
            await self.planner.feedback(request_id, 0.0, user, implicit="regenerated")
        except CompletionError as exc:  # the router is gone, or a rating raced this one in
            logger.info("regeneration of %s not rated: %s", request_id, exc)
            return ""
        return f"the same request {ago:.0f} s ago ({request_id}) was rated 0 as regenerated"

    async def _cascade(
        self, completer: Completer, plan: CascadePlan, request: ChatRequest, caller: Caller, asked: str | None
    ) -> ChatResult:
        """Up the plan's ladder: each model answers, and that rung's escalator keeps the answer or asks the next model.

        Every call made is paid, so the result's cost, latency and attempts add up all of them. An escalation that
        fails (the next model down, a budget refusing it) returns the last answer and says so; that request trains
        nothing, since the answer the user got was not the one decided on.
        """
        answered = await completer.chat(request.model_copy(update={"model": plan.ladder[0]}), caller=caller)
        spent = (answered.cost_usd, answered.latency_ms, answered.attempts)
        decision = None
        for rung in range(len(plan.ladder) - 1):
            decision = await self.planner.escalate(plan, rung, answered.message.text(), decision)
            if not decision.escalation.escalate:
                break
            nxt = plan.ladder[rung + 1]
            try:
                answered = await completer.chat(request.model_copy(update={"model": nxt}), caller=caller)
            except CompletionError as exc:
                logger.warning("cascade: escalation to %s failed, keeping %s's answer: %s", nxt, plan.ladder[rung], exc)
                reason = f"{decision.route.reason}; escalation failed: {exc}"
                return _summed(answered, spent, reason)
            spent = (spent[0] + answered.cost_usd, spent[1] + answered.latency_ms, spent[2] + answered.attempts)
        assert decision is not None
        self.planner.remember(answered.request_id, decision, caller.user, asked)
        return _summed(answered, spent, decision.route.reason)

    async def stream(
        self, request: ChatRequest, caller: Caller, asked: str | None = None
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`chat`, streamed: text deltas, then one ``done`` event with the full result.

        Raises:
            CompletionError: as :meth:`chat` (before the first event, or from the stream).
        """
        completer = self._completer()
        note = await self._regeneration(asked, caller.user)
        events = completer.stream(request, caller=caller).__aiter__()
        # The route function runs while the first event is awaited; the context variable that collects its
        # decision must not stay set across a yield (the consumer may resume this generator in another context).
        with self.planner.deciding() as decided:
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return
        event: StreamEvent | None = first
        while event is not None:
            if event.kind == "done" and event.result is not None:
                result = event.result
                self.planner.remember(result.request_id, decided.decision, caller.user, asked)
                if not result.reason and decided.reason:
                    result = result.model_copy(update={"reason": decided.reason})
                event = event.model_copy(update={"result": _noted(result, note)})
            yield event
            event = await anext(events, None)

    async def usage_of(self, user: str) -> dict[str, Any]:
        """``user``'s spend by model, project and day (from the gateway's ledger)."""
        if self.ledger is None:
            return {"user": user, "available": False, "note": NO_PROVIDER}
        from hanzo_hub.hub.llm_gateway import usage_report

        return {"user": user, "available": True, **await usage_report(self.ledger, user)}

    async def sample(
        self, server: str, params: types.CreateMessageRequestParams, user: str
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData | None:
        """Answer a downstream server's sampling request with the router, for ``user`` (``None``: no provider)."""
        if self.completer is None:
            return None
        try:
            request = to_chat_request(params, self.registry)
            result = await self.chat(request, Caller(user=user))
        except HubError as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"hanzo-hub: sampling failed: {exc}")
        except ValueError as exc:  # a request the gateway vocabulary cannot express
            return types.ErrorData(code=types.INVALID_PARAMS, message=f"hanzo-hub: bad sampling request: {exc}")
        return to_create_message_result(result, with_tools=bool(params.tools))


def _summed(result: ChatResult, spent: tuple[float, float, int], reason: str) -> ChatResult:
    """``result`` with the cost, latency and attempts of every call of a cascade, and its reason."""
    cost, latency, attempts = spent
    return result.model_copy(update={"reason": reason, "cost_usd": cost, "latency_ms": latency, "attempts": attempts})


def _noted(result: ChatResult, note: str) -> ChatResult:
    """``result`` with ``note`` appended to its reason."""
    if not note:
        return result
    return result.model_copy(update={"reason": f"{result.reason}; {note}" if result.reason else note})
