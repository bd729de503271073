"""The gateway: one :class:`~hanzo_hub.llm.types.Completer` in front of every configured provider.

For each request it picks candidate models (the request's own model and its fallbacks, or a pluggable route
function when ``request.model`` is ``None``), drops those that cannot serve it (provider not configured, missing
capability, context window, ``max_cost``), checks the caller's rate limit, then tries candidates in order. Before
the first byte goes to a provider the worst-case cost (prompt tokens + ``max_tokens``) is reserved against every
budget that applies, so a request that could overspend is refused before anything is spent. Each deployment gets
``retries`` more attempts with exponential backoff and jitter, honouring ``Retry-After``; a deployment that used
them up cools down and is skipped while another candidate can answer. Every attempt is bounded by the deployment's
timeout. Usage and cost (exact, in :class:`~decimal.Decimal` USD) go to the ledger and the request log.

Streams fail over like plain calls until the first event reaches the caller; after that a failure ends the stream
with :class:`~hanzo_hub.errors.ProviderError` (the caller has seen part of an answer, so it cannot be replayed).
A stream that breaks or is abandoned after its first event is charged for the prompt and the output delivered.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from decimal import Decimal
from types import TracebackType
from typing import Any

import anyio
import httpx2

from hanzo_hub.errors import BudgetExceeded, CompletionError, NoEligibleModel, ProviderError, RateLimited
from hanzo_hub.llm.providers import Deployment, Provider, load_provider
from hanzo_hub.llm.providers.base import REQUEST_ERROR_STATUSES
from hanzo_hub.llm.ratelimit import RateLimiter
from hanzo_hub.llm.registry import TIER_ORDER, ModelRegistry, ModelSpec
from hanzo_hub.llm.request_log import RequestLog
from hanzo_hub.llm.retry import Cooldowns, RetryPolicy
from hanzo_hub.llm.tokens import TokenCounter, count_completion, count_prompt, default_counter
from hanzo_hub.llm.types import Caller, ChatMessage, ChatRequest, ChatResult, StreamEvent, Usage
from hanzo_hub.llm.usage import Reservation, UsageLedger, UsageRecord, cost_of, usd

__all__ = ["Gateway", "RouteFn", "default_route"]

logger = logging.getLogger(__name__)

THREADED_COUNT_CHARS = 20_000
"""Prompts longer than this (in characters) are tokenized off the event loop."""

PARTIAL_ACCOUNTING_TIMEOUT = 5.0
"""Bound on recording a stream that failed or was abandoned (runs shielded from cancellation)."""

RouteFn = Callable[[ChatRequest], Awaitable[tuple[list[str], str]]]
"""Chooses for a request without a model: ``(candidate model ids, best first; why)``."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    model: ModelSpec
    deployment: Deployment
    estimate: Decimal

    @property
    def key(self) -> str:
        return f"{self.deployment.name}/{self.model.id}"


@dataclass
class _Job:
    request: ChatRequest
    caller: Caller
    stream: bool
    candidates: list[_Candidate]
    reason: str
    prompt_tokens: int
    request_id: str = field(default_factory=lambda: f"req-{uuid.uuid4().hex[:16]}")
    started: float = field(default_factory=time.monotonic)
    attempts: list[dict[str, Any]] = field(default_factory=list)


def default_route(registry: ModelRegistry, configured: Sequence[str]) -> RouteFn:
    """A route without a learned router: the configured models ordered by the request's policy.

    ``cost_first``: cheapest first; ``quality_first``: best tier first, cheaper first within it; ``balanced``:
    the middle tier first, then the fast and the best tiers.
    """
    models = [registry[m] for m in configured]

    async def route(request: ChatRequest) -> tuple[list[str], str]:
        def price(m: ModelSpec) -> float:
            return m.price_in + m.price_out

        if request.policy == "cost_first":
            ordered = sorted(models, key=price)
        elif request.policy == "quality_first":
            ordered = sorted(models, key=lambda m: (-TIER_ORDER[m.tier], price(m)))
        else:
            ordered = sorted(models, key=lambda m: (abs(TIER_ORDER[m.tier] - 1), price(m)))
        return [m.id for m in ordered], f"default route ({request.policy})"

    return route


def _needs(request: ChatRequest) -> set[str]:
    needs = {"tools"} if request.tools else set()
    if any(not isinstance(m.content, str) and any(p.type == "image" for p in m.content) for m in request.messages):
        needs.add("vision")
    return needs


class Gateway:
    """Routed, retried, budgeted completion over the configured providers (implements ``Completer``).

    Args:
        registry: every known model.
        deployments: provider name (a model's ``provider``) -> deployment.
        route: chooses candidates when ``request.model`` is ``None``; default :func:`default_route` over
            ``route_models`` (or every model whose provider is configured).
        fallbacks: model id -> models to fail over to, in order.
        retry: retry, backoff and cooldown policy.
        ledger, limiter, log: where usage goes, per-user rate limits, the request log (each optional).
        http: the HTTP client (default: one owned and closed by the gateway).
        clock, sleep, rng: injectable for tests.
    """

    def __init__(
        self,
        registry: ModelRegistry,
        deployments: Mapping[str, Deployment],
        *,
        route: RouteFn | None = None,
        route_models: Sequence[str] = (),
        fallbacks: Mapping[str, Sequence[str]] | None = None,
        retry: RetryPolicy | None = None,
        ledger: UsageLedger | None = None,
        limiter: RateLimiter | None = None,
        log: RequestLog | None = None,
        counter: TokenCounter | None = None,
        http: httpx2.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.registry = registry
        self.deployments = dict(deployments)
        configured = list(route_models) or [m.id for m in registry if m.provider in self.deployments]
        self._route = route or default_route(registry, configured)
        self.fallbacks = {k: list(v) for k, v in (fallbacks or {}).items()}
        self.retry = retry or RetryPolicy()
        self.ledger = ledger
        self.limiter = limiter
        self.log = log
        self.counter = counter or default_counter()
        self._owns_http = http is None
        self._http = http or httpx2.AsyncClient(timeout=httpx2.Timeout(60.0, connect=10.0))
        self._providers: dict[str, Provider] = {}
        self.cooldowns = Cooldowns(clock)
        self._sleep = sleep
        self._rng = rng or random.Random()

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client (when the gateway made it)."""
        if self._owns_http:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._http.aclose()

    def _provider(self, api: str) -> Provider:
        if api not in self._providers:
            self._providers[api] = load_provider(api, self._http)
        return self._providers[api]

    # ---- planning ----

    async def _model_ids(self, request: ChatRequest) -> tuple[list[str], str]:
        if request.model is not None:
            return [request.model, *self.fallbacks.get(request.model, [])], "pinned"
        ids, reason = await self._route(request)
        return list(dict.fromkeys(ids)), reason

    def _candidate(self, model_id: str, request: ChatRequest, prompt: int, skipped: list[str]) -> _Candidate | None:
        if model_id not in self.registry:
            skipped.append(f"{model_id}: not in the registry")
            return None
        model = self.registry[model_id]
        deployment = self.deployments.get(model.provider)
        estimate = cost_of(model, Usage(input_tokens=prompt, output_tokens=request.max_tokens))
        why = None
        if deployment is None:
            why = f"provider '{model.provider}' is not configured"
        elif missing := _needs(request) - model.capabilities:
            why = f"lacks {', '.join(sorted(missing))}"
        elif prompt + request.max_tokens > model.context_window:
            why = f"{prompt} prompt + {request.max_tokens} max tokens exceed its {model.context_window} window"
        elif request.max_cost is not None and estimate > Decimal(str(request.max_cost)):
            why = f"could cost ${usd(estimate)}, over max_cost ${request.max_cost}"
        if why is not None or deployment is None:
            skipped.append(f"{model_id}: {why}")
            return None
        return _Candidate(model, deployment, estimate)

    async def _plan(self, request: ChatRequest, caller: Caller, *, stream: bool) -> _Job:
        if request.model is not None and request.model not in self.registry:
            self.registry[request.model]  # raises ModelNotFound
        ids, reason = await self._model_ids(request)
        prompt = await self._count_prompt(request)
        skipped: list[str] = []
        candidates = [c for m in ids if (c := self._candidate(m, request, prompt, skipped)) is not None]
        job = _Job(request, caller, stream, candidates, reason, prompt)
        if not candidates:
            error = NoEligibleModel("no model can serve this request: " + "; ".join(skipped or ["none configured"]))
            await self._log_failure(job, "refused", error)
            raise error
        if self.limiter is not None:
            try:
                self.limiter.acquire(caller.user, prompt + request.max_tokens)
            except RateLimited as exc:
                await self._log_failure(job, "refused", exc)
                raise
        return job

    async def _count_prompt(self, request: ChatRequest) -> int:
        """Prompt tokens; a long prompt is tokenized in a worker thread so the event loop keeps serving."""
        size = sum(len(m.text()) for m in request.messages)
        if size < THREADED_COUNT_CHARS:
            return count_prompt(request.messages, request.tools, self.counter)
        return await anyio.to_thread.run_sync(count_prompt, request.messages, request.tools, self.counter)

    def _ordered(self, job: _Job) -> list[_Candidate]:
        """Candidates in order, deployments cooling down skipped while another one is available."""
        ready = [c for c in job.candidates if self.cooldowns.remaining(c.key) == 0]
        if ready:
            for c in job.candidates:
                if c not in ready:
                    job.attempts.append(self._attempt(c, "cooldown", None, 0.0))
            return ready
        return sorted(job.candidates, key=lambda c: self.cooldowns.remaining(c.key))

    def _reserve(self, job: _Job, candidate: _Candidate) -> Reservation | None:
        if self.ledger is None:
            return None
        return self.ledger.reserve(job.caller, candidate.estimate)

    # ---- attempts ----

    @staticmethod
    def _attempt(c: _Candidate, outcome: str, error: ProviderError | None, started: float) -> dict[str, Any]:
        entry: dict[str, Any] = {"provider": c.deployment.name, "model": c.model.id, "outcome": outcome}
        if error is not None:
            entry["status"] = error.status
            entry["error"] = error.reason
        if started:
            entry["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
        return entry

    async def _after_failure(self, job: _Job, c: _Candidate, error: ProviderError, retry: int) -> bool:
        """Record a failed attempt; wait and return True to retry the same deployment, False to move on.

        Raises:
            ProviderError: the request itself is bad (another deployment would refuse it too).
        """
        if not error.retryable:
            if error.status in REQUEST_ERROR_STATUSES:
                raise error
            self.cooldowns.cool(c.key, self.retry.cooldown)
            return False
        wait = self.retry.wait(retry, error.retry_after, self._rng) if retry < self.retry.retries else None
        if wait is None:
            self.cooldowns.cool(c.key, max(self.retry.cooldown, error.retry_after or 0.0))
            return False
        logger.info("llm %s attempt %d failed (%s); retrying in %.2fs", c.key, retry + 1, error.reason, wait)
        await self._sleep(wait)
        return True

    async def _one_chat(self, job: _Job, c: _Candidate) -> ChatResult | ProviderError:
        provider = self._provider(c.deployment.api)
        error = ProviderError(c.deployment.name, "not tried", retryable=True)
        for retry in range(self.retry.retries + 1):
            started = time.monotonic()
            try:
                with anyio.fail_after(c.deployment.timeout):
                    result = await provider.chat(c.deployment, job.request, c.model)
            except TimeoutError:
                error = ProviderError(c.deployment.name, f"no answer within {c.deployment.timeout:g}s", retryable=True)
            except ProviderError as exc:
                error = exc
            else:
                job.attempts.append(self._attempt(c, "ok", None, started))
                self.cooldowns.clear(c.key)
                return result
            job.attempts.append(self._attempt(c, "error", error, started))
            if not await self._after_failure(job, c, error, retry):
                break
        return error

    async def chat(self, request: ChatRequest, *, caller: Caller) -> ChatResult:
        """Answer ``request`` for ``caller``.

        Raises:
            ModelNotFound: ``request.model`` is not in the registry.
            NoEligibleModel: no candidate can serve it (provider, capability, context window, ``max_cost``).
            RateLimited: the caller is over its rate limit.
            BudgetExceeded: the request could cost more than a budget has left (nothing was sent).
            ProviderError: every candidate failed (the last failure), or the request was refused as bad.
        """
        job = await self._plan(request, caller, stream=False)
        failure: CompletionError | None = None
        for c in self._ordered(job):
            reservation = self._reserve_or_skip(job, c)
            if isinstance(reservation, BudgetExceeded):
                failure = failure or reservation
                continue
            try:
                outcome = await self._one_chat(job, c)
            except BaseException as exc:
                self._release(reservation)
                if isinstance(exc, ProviderError):
                    await self._log_failure(job, "error", exc)
                raise
            if isinstance(outcome, ChatResult):
                return await self._finish(job, c, outcome, reservation)
            self._release(reservation)
            failure = outcome
        await self._fail(job, failure)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _fail(self, job: _Job, failure: CompletionError | None) -> None:
        error = failure or ProviderError("gateway", "no candidate could be tried", retryable=False)
        outcome = "refused" if isinstance(error, BudgetExceeded) else "error"
        await self._log_failure(job, outcome, error)
        raise error

    def _reserve_or_skip(self, job: _Job, c: _Candidate) -> Reservation | BudgetExceeded | None:
        """The candidate's budget reservation, or the refusal (recorded as a skipped attempt)."""
        try:
            return self._reserve(job, c)
        except BudgetExceeded as exc:
            job.attempts.append({"provider": c.deployment.name, "model": c.model.id, "outcome": "budget"})
            return exc

    @staticmethod
    def _release(reservation: Reservation | None) -> None:
        if reservation is not None:
            reservation.release()

    # ---- streaming ----

    async def stream(self, request: ChatRequest, *, caller: Caller) -> AsyncIterator[StreamEvent]:
        """Stream the answer to ``request``: text and tool-call events, then ``done`` with the priced result.

        Raises:
            The errors of :meth:`chat`; a failure after the first event raises ``ProviderError`` mid-stream.
        """
        job = await self._plan(request, caller, stream=True)
        failure: CompletionError | None = None
        for c in self._ordered(job):
            reservation = self._reserve_or_skip(job, c)
            if isinstance(reservation, BudgetExceeded):
                failure = failure or reservation
                continue
            try:
                opened = await self._open_stream(job, c)
            except BaseException as exc:
                self._release(reservation)
                if isinstance(exc, ProviderError):
                    await self._log_failure(job, "error", exc)
                raise
            if isinstance(opened, ProviderError):
                self._release(reservation)
                failure = opened
                continue
            # From the first event on, _relay owns the reservation: it records the answer, or charges the part
            # the caller received when the stream fails or is abandoned.
            async with aclosing(self._relay(job, c, opened, reservation)) as relay:
                async for event in relay:
                    yield event
            return
        await self._fail(job, failure)

    async def _open_stream(
        self, job: _Job, c: _Candidate
    ) -> tuple[AsyncIterator[StreamEvent], StreamEvent, float] | ProviderError:
        """Start a stream and read its first event, retrying like :meth:`_one_chat`."""
        provider = self._provider(c.deployment.api)
        error = ProviderError(c.deployment.name, "not tried", retryable=True)
        for retry in range(self.retry.retries + 1):
            started = time.monotonic()
            events = provider.stream(c.deployment, job.request, c.model)
            try:
                with anyio.fail_after(c.deployment.timeout):
                    first = await anext(aiter(events))
            except TimeoutError:
                error = ProviderError(c.deployment.name, f"no answer within {c.deployment.timeout:g}s", retryable=True)
            except StopAsyncIteration:
                error = ProviderError(c.deployment.name, "empty stream", retryable=True)
            except ProviderError as exc:
                error = exc
            else:
                return events, first, started
            await _close(events)
            job.attempts.append(self._attempt(c, "error", error, started))
            if not await self._after_failure(job, c, error, retry):
                break
        return error

    async def _relay(
        self,
        job: _Job,
        c: _Candidate,
        opened: tuple[AsyncIterator[StreamEvent], StreamEvent, float],
        reservation: Reservation | None,
    ) -> AsyncGenerator[StreamEvent, None]:
        events, event, started = opened
        iterator = aiter(events)
        received: list[StreamEvent] = []
        try:
            while event.kind != "done":
                received.append(event)
                yield event
                try:
                    with anyio.fail_after(c.deployment.timeout):
                        event = await anext(iterator)
                except TimeoutError:
                    raise ProviderError(c.deployment.name, "the stream stalled", retryable=True) from None
                except StopAsyncIteration:
                    raise ProviderError(c.deployment.name, "the stream ended early", retryable=True) from None
        except BaseException as exc:
            with anyio.CancelScope(shield=True), anyio.move_on_after(PARTIAL_ACCOUNTING_TIMEOUT):
                await _close(events)
                await self._charge_partial(job, c, received, reservation, exc, started)
            raise
        await _close(events)
        job.attempts.append(self._attempt(c, "ok", None, started))
        self.cooldowns.clear(c.key)
        assert event.result is not None
        result = await self._finish(job, c, event.result, reservation)
        yield StreamEvent(kind="done", result=result)

    async def _charge_partial(
        self,
        job: _Job,
        c: _Candidate,
        received: Sequence[StreamEvent],
        reservation: Reservation | None,
        error: BaseException,
        started: float,
    ) -> None:
        """A stream ended after events reached the caller: the provider bills what it generated, so the ledger
        gets the prompt plus the received output (counted), and the log says ``error`` or ``abandoned``."""
        failed = error if isinstance(error, ProviderError) else None
        job.attempts.append(self._attempt(c, "error" if failed else "abandoned", failed, started))
        text = "".join(e.text for e in received)
        calls = tuple(e.tool_call for e in received if e.tool_call is not None)
        message = ChatMessage(role="assistant", content=text, tool_calls=calls)
        usage = Usage(input_tokens=job.prompt_tokens, output_tokens=count_completion(message, self.counter))
        cost = cost_of(c.model, usage)
        partial = ChatResult(
            model=c.model.id,
            provider=c.deployment.name,
            message=message,
            finish_reason="error",
            usage=usage,
            cost_usd=float(cost),
            request_id=job.request_id,
        )
        if self.ledger is not None:
            await self.ledger.record(UsageRecord.of(job.request_id, job.caller, partial, cost), reservation)
        if self.log is not None:
            outcome = "error" if failed else "abandoned"
            await self.log.write_failure(
                job.request_id,
                job.caller,
                job.request,
                outcome,
                error,
                job.attempts,
                job.stream,
                partial=partial,
                cost=cost,
            )

    # ---- accounting ----

    def _usage(self, job: _Job, result: ChatResult) -> Usage:
        usage = result.usage
        return Usage(
            input_tokens=usage.input_tokens or job.prompt_tokens,
            output_tokens=usage.output_tokens or count_completion(result.message, self.counter),
        )

    async def _finish(
        self, job: _Job, c: _Candidate, result: ChatResult, reservation: Reservation | None
    ) -> ChatResult:
        usage = self._usage(job, result)
        cost = cost_of(c.model, usage)
        reason = job.reason
        if c is not job.candidates[0]:
            failed = [a["model"] for a in job.attempts if a["outcome"] != "ok"]
            reason += f"; failover after {', '.join(dict.fromkeys(failed))}"
        final = result.model_copy(
            update={
                "usage": usage,
                "cost_usd": float(cost),
                "latency_ms": round((time.monotonic() - job.started) * 1000, 1),
                "attempts": sum(1 for a in job.attempts if a["outcome"] in ("ok", "error")),
                "reason": reason,
                "request_id": job.request_id,
            }
        )
        record = UsageRecord.of(job.request_id, job.caller, final, cost)
        if self.ledger is not None:
            await self.ledger.record(record, reservation)
        if self.log is not None:
            await self.log.write_result(job.request_id, job.caller, job.request, final, cost, job.attempts, job.stream)
        return final

    async def _log_failure(self, job: _Job, outcome: str, error: BaseException) -> None:
        if self.log is not None:
            await self.log.write_failure(
                job.request_id, job.caller, job.request, outcome, error, job.attempts, job.stream
            )


async def _close(events: AsyncIterator[StreamEvent]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):
            await aclose()
