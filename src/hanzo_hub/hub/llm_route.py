"""Which models answer a request with no explicit model: candidates, the router's choice, a tier-ordered fallback.

Candidates are ``llm.route_models`` (in that order), else every registry model whose provider is configured. Models
that cannot take the request (context window, tools, images, the request's cost limit) are dropped. The first
candidate is the router's decision (category classifier on the shared embedder's vector, then the neural Thompson
bandit) once the bandit has had ``ROUTER_MIN_FEEDBACK`` ratings; before that, and whenever the router cannot be
built (no torch, the embedder fails), a fixed order by tier decides (the policy says which tier first). The others
follow in tier order, as the gateway's failover list. The reason names which of these happened.

Requests of the ``llm.cascade.categories`` (no explicit model, no tools or images) take the cascade instead:
:meth:`RoutePlanner.cascade_plan` names a ladder of eligible models (the cheapest, the cheapest mid-tier one when one
sits between, the best), the runtime asks the first, and :meth:`RoutePlanner.escalate` lets that rung's learned
escalator read the answer's checks and decide whether the next model answers too.

Each decision is kept under the gateway's request id (bounded), so ``feedback`` can reward it later; the bandit is
saved after every rating (``<home>/llm/router.npz``, the escalators in ``escalator.npz`` and ``escalator-1.npz``)
and each rating appended to ``<home>/llm/feedback.jsonl``. Under the ``balanced`` policy a cost pacer
(``llm.router.target_cost_share``) prices a dollar; its price and the router's cost scale are saved in
``router_state.json`` with every rating and when the hub stops, so a restart goes on where it left off.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt

from hanzo_hub.config import HubSettings
from hanzo_hub.errors import CompletionError, NoEligibleModel
from hanzo_hub.line_log import LineLog
from hanzo_hub.llm.escalation import CascadeDecision, Escalator, LearnedCascade
from hanzo_hub.llm.ratings import Ratings
from hanzo_hub.llm.registry import TIER_ORDER, ModelRegistry, ModelSpec
from hanzo_hub.llm.router import CostPacer, Policy, RouteDecision, Router, RouteRequest, RouterState
from hanzo_hub.llm.types import ChatRequest, ImagePart
from hanzo_hub.vectors import build_embedder
from hanzo_hub.vectors.base import Embedder

__all__ = [
    "ROUTER_MIN_FEEDBACK",
    "CascadePlan",
    "Decided",
    "RoutePlanner",
    "cascade_ladder",
    "estimate_tokens",
    "tier_order",
]

logger = logging.getLogger(__name__)

ROUTER_MIN_FEEDBACK = 8
"""Ratings the bandit needs before its choice replaces the tier order (one training round of the bandit)."""
MAX_DECISIONS = 10_000
"""Decisions remembered for feedback (oldest forgotten first)."""
ROUTER_FILE = "router.npz"
MAX_RUNGS = 2
"""Escalators a ladder can use: fast -> mid and mid -> best."""


def escalator_file(rung: int) -> str:
    """Where ``rung``'s escalator is saved: ``escalator.npz``, then ``escalator-N.npz``."""
    return "escalator.npz" if rung == 0 else f"escalator-{rung}.npz"


STATE_FILE = "router_state.json"
RECENT_VECTORS = 64
"""Query embeddings kept for reuse (the cascade's check and the route of one request embed the same text)."""
FEEDBACK_FILE = "feedback.jsonl"

_TIER_FIRST: dict[str, tuple[str, ...]] = {
    "quality_first": ("best", "mid", "fast"),
    "balanced": ("mid", "fast", "best"),
    "cost_first": ("fast", "mid", "best"),
    "pinned": ("mid", "fast", "best"),
}


def estimate_tokens(request: ChatRequest) -> int:
    """A quick input-token estimate (about four characters a token) for eligibility checks."""
    chars = sum(len(m.text()) for m in request.messages) + sum(
        len(t.name) + len(t.description) + len(json.dumps(t.input_schema)) for t in request.tools
    )
    return chars // 4 + 4 * len(request.messages) + 1


def tier_order(models: Sequence[ModelSpec], policy: str) -> list[ModelSpec]:
    """``models`` ordered by the policy's tier preference, cheaper first within a tier."""
    first = _TIER_FIRST.get(policy, _TIER_FIRST["balanced"])
    rank = {tier: i for i, tier in enumerate(first)}
    return sorted(models, key=lambda m: (rank.get(m.tier, len(rank)), m.price_in + m.price_out, TIER_ORDER[m.tier]))


def cascade_ladder(eligible: Sequence[ModelSpec], tokens_in: float, max_tokens: int) -> list[ModelSpec]:
    """The cascade's models for a request: the cheapest, the cheapest mid-tier one if that tier sits between, the best.

    The best is the best tier's cheapest model (as ``tier_order(..., "quality_first")`` puts first). One model, or a
    cheapest model that is also the best, gives a ladder of one: no cascade.
    """
    cheap = min(eligible, key=lambda m: (m.cost(tokens_in, max_tokens), TIER_ORDER[m.tier]))
    best = tier_order(eligible, "quality_first")[0]
    if cheap.id == best.id:
        return [cheap]
    between = [m for m in eligible if TIER_ORDER[cheap.tier] < TIER_ORDER[m.tier] < TIER_ORDER[best.tier]]
    middle = min(between, key=lambda m: (m.cost(tokens_in, max_tokens), m.id), default=None)
    return [cheap, *([middle] if middle is not None else []), best]


def _query(request: ChatRequest) -> str:
    """The text routing looks at: the user turns, the last 4,000 characters."""
    return "\n".join(m.text() for m in request.messages if m.role == "user")[-4000:] or " "


def _needs(request: ChatRequest) -> frozenset[str]:
    needs = set()
    if request.tools:
        needs.add("tools")
    if any(isinstance(p, ImagePart) for m in request.messages if not isinstance(m.content, str) for p in m.content):
        needs.add("vision")
    return frozenset(needs)


@dataclass
class Decided:
    """What one routing call decided (filled by :meth:`RoutePlanner.route`, read by whoever asked)."""

    models: list[str] = field(default_factory=list)
    reason: str = ""
    decision: RouteDecision | None = None


@dataclass(frozen=True)
class CascadePlan:
    """A request the cascade takes: the ladder's first model, then each next one while the escalators say so."""

    ladder: tuple[str, ...]
    """Model ids, cheapest first, the best last (at least two)."""
    question: str
    request: RouteRequest
    features: tuple[npt.NDArray[np.float32], str] = field(repr=False)
    """The router's features of the query and its category."""

    @property
    def cheap(self) -> str:
        return self.ladder[0]

    @property
    def best(self) -> str:
        return self.ladder[-1]


_decided: ContextVar[Decided | None] = ContextVar("hanzo_hub_llm_decided", default=None)


class RoutePlanner:
    """The gateway's route function, plus the memory of decisions that feedback rewards."""

    def __init__(self, settings: HubSettings, registry: ModelRegistry) -> None:
        self.settings = settings
        self.registry = registry
        self.dir = settings.home / "llm"
        self._feedback_log = LineLog(self.dir / FEEDBACK_FILE, what="the feedback log", keep_open=False)
        self._router: Router | None = None
        self._router_failed = False
        self._embedder: Embedder | None = None
        self._lock = anyio.Lock()
        self._cascade: LearnedCascade | None = None
        self._vectors: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self.ratings: Ratings[RouteDecision | CascadeDecision] = Ratings(MAX_DECISIONS, time.monotonic)

    # -- candidates ---------------------------------------------------------------------------------------------

    def candidates(self) -> list[ModelSpec]:
        """The models the router chooses among (configured order, else every model of a configured provider)."""
        llm = self.settings.llm
        if llm.route_models:
            return [self.registry[m] for m in llm.route_models if m in self.registry]
        return [m for m in self.registry if m.provider in llm.providers]

    def eligible(self, request: ChatRequest) -> list[ModelSpec]:
        """Candidates that can take ``request``: context window, capabilities and the request's cost limit."""
        tokens_in = estimate_tokens(request)
        needs = _needs(request)
        return [
            m
            for m in self.candidates()
            if m.context_window >= tokens_in + request.max_tokens
            and needs <= m.capabilities
            and (request.max_cost is None or m.cost(tokens_in, request.max_tokens) <= request.max_cost)
        ]

    # -- routing ------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def deciding(self) -> Iterator[Decided]:
        """Collect what the route function decides for the requests made inside the block."""
        decided = Decided()
        token = _decided.set(decided)
        try:
            yield decided
        finally:
            _decided.reset(token)

    async def route(self, request: ChatRequest) -> tuple[list[str], str]:
        """Ordered candidate model ids and the reason (the gateway's ``route`` callable).

        Raises:
            NoEligibleModel: no candidate can take the request.
        """
        if request.model is not None:
            return self._note([request.model], "explicit model", None)
        eligible = self.eligible(request)
        if not eligible:
            raise NoEligibleModel(
                "no configured model can take this request (context window, tools/vision, max_cost); "
                "configure llm.providers / llm.route_models"
            )
        ordered = tier_order(eligible, request.policy)
        router = await self._ensure_router()
        if router is None or len(eligible) == 1:
            why = "only eligible model" if len(eligible) == 1 else "tier order (router unavailable)"
            return self._note([m.id for m in ordered], f"{why}, policy={request.policy}", None)
        vector = await self._vector(_query(request))
        steps = router.bandit.steps
        if steps < ROUTER_MIN_FEEDBACK:
            x, category = router.features(vector)
            first = ordered[0]
            arm = router.registry.ids().index(first.id)
            reason = f"tier order (router untrained: {steps}/{ROUTER_MIN_FEEDBACK} ratings), policy={request.policy}"
            decision = RouteDecision(first.id, category, reason, 0.0, x, arm)
            return self._note([m.id for m in ordered], f"{reason}, category={category}", decision)
        policy = Policy(kind="balanced" if request.policy == "pinned" else request.policy, max_cost=request.max_cost)
        allowed = {m.id for m in eligible}
        decision = await router.aroute(
            RouteRequest(vector, float(estimate_tokens(request)), float(request.max_tokens), _needs(request), policy)
        )
        if decision.model not in allowed:  # the router's own limits differ slightly from ours: keep ours
            return self._note([m.id for m in ordered], f"tier order (router chose {decision.model})", None)
        rest = [m.id for m in ordered if m.id != decision.model]
        return self._note([decision.model, *rest], f"router: {decision.reason}", decision)

    async def cascade_plan(self, request: ChatRequest) -> CascadePlan | None:
        """The cascade's two models for ``request``, or ``None`` when it routes directly.

        A request cascades when it names no model, has no tools or images, its category is one of
        ``llm.cascade.categories``, and a cheaper and a better model are both eligible.
        """
        if not self.settings.llm.cascade.categories or request.model is not None or _needs(request):
            return None
        eligible = self.eligible(request)
        if len(eligible) < 2 or await self._ensure_router() is None or self._cascade is None:
            return None
        query = _query(request)
        vector = await self._vector(query)
        features = self._cascade.router.features(vector)
        if not self._cascade.applies(features[1]):
            return None
        tokens_in = float(estimate_tokens(request))
        ladder = cascade_ladder(eligible, tokens_in, request.max_tokens)
        if len(ladder) < 2:
            return None
        policy = Policy(kind="balanced" if request.policy == "pinned" else request.policy, max_cost=request.max_cost)
        route = RouteRequest(vector, tokens_in, float(request.max_tokens), frozenset(), policy)
        return CascadePlan(tuple(m.id for m in ladder), query, route, features)

    async def escalate(
        self, plan: CascadePlan, rung: int, answer: str, earlier: CascadeDecision | None = None
    ) -> CascadeDecision:
        """Keep ``plan.ladder[rung]``'s ``answer`` or escalate to the next model (that rung's escalator decides).

        ``earlier`` is the decision that escalated to this rung (``None`` on the first).
        """
        cascade = self._cascade
        assert cascade is not None
        decide = functools.partial(
            cascade.decide,
            plan.request,
            plan.features,
            plan.question,
            plan.ladder[rung],
            plan.ladder[rung + 1],
            answer,
            earlier=earlier,
            final=rung + 2 == len(plan.ladder),
        )
        decision = await anyio.to_thread.run_sync(decide, limiter=cascade.router.limiter)
        self._note([decision.model], decision.route.reason, decision.route)
        return decision

    async def _vector(self, query: str) -> npt.NDArray[np.float32]:
        """The query's embedding; the last few are kept, so a request the cascade declines is not embedded twice."""
        vector = self._vectors.get(query)
        if vector is None:
            assert self._embedder is not None
            vector = np.asarray((await self._embedder.embed([query]))[0], np.float32)
            self._vectors[query] = vector
            while len(self._vectors) > RECENT_VECTORS:
                self._vectors.popitem(last=False)
        return vector

    def _note(self, models: list[str], reason: str, decision: RouteDecision | None) -> tuple[list[str], str]:
        decided = _decided.get()
        if decided is not None:
            decided.models, decided.reason, decided.decision = models, reason, decision
        return models, reason

    async def _ensure_router(self) -> Router | None:
        """The router over the candidates, built on first use (embedder, classifier, saved bandit); else ``None``."""
        if self._router is not None or self._router_failed:
            return self._router
        async with self._lock:
            if self._router is None and not self._router_failed:
                try:
                    self._router = await anyio.to_thread.run_sync(self._build_router)
                except Exception:  # no torch, no model, a broken save: route by tier order instead
                    logger.warning("the LLM router is unavailable; routing by tier order", exc_info=True)
                    self._router_failed = True
        return self._router

    def _build_router(self) -> Router | None:
        models = [m.id for m in self.candidates()]
        if len(models) < 2:
            return None
        from hanzo_hub.llm.bandit import NeuralThompsonBandit
        from hanzo_hub.llm.classify import CategoryClassifier

        embedder: Embedder = build_embedder(
            self.settings.memory.embedder, self.settings.embedding, home=self.settings.home
        )

        def embed(texts: Sequence[str]) -> Any:
            return np.asarray(embedder.embed_sync(texts), np.float32)

        classifier = CategoryClassifier.from_prototypes(embed)
        dim = embedder.dimension + len(classifier.categories)
        bandit = None
        saved = self.dir / ROUTER_FILE
        if saved.is_file():
            with contextlib.suppress(Exception):  # an unreadable save starts a fresh bandit
                loaded = NeuralThompsonBandit.load(saved)
                bandit = loaded if loaded.arms == tuple(models) and loaded.dim == dim else None
        self._embedder = embedder
        paced = self.settings.llm.router
        pacer = None if paced.target_cost_share is None else CostPacer(paced.target_cost_share, step=paced.pacer_step)
        router = Router(self.registry.subset(models), classifier, bandit or NeuralThompsonBandit(models, dim), pacer)
        state = self._load_state(models)
        if state is not None:
            router.restore(state)
        n_cat = len(classifier.categories)
        escalators: list[Escalator] = []
        for rung in range(MAX_RUNGS):
            path = self.dir / escalator_file(rung)
            kept: Escalator | None = None
            if path.is_file():
                with contextlib.suppress(Exception):  # an unreadable or mismatched save starts a fresh escalator
                    kept = Escalator.load(path, n_cat)
            if kept is None and rung > 0:
                break
            escalators.append(kept or Escalator(n_cat))
        categories = frozenset(self.settings.llm.cascade.categories)
        self._cascade = LearnedCascade(router, escalators[0], categories, *escalators[1:])
        return router

    def _load_state(self, models: list[str]) -> RouterState | None:
        """The saved pacer price and cost scale, if saved for these models; an unreadable file is logged and ignored."""
        path = self.dir / STATE_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("models") != models:
                logger.info("router state in %s is for other models; starting afresh", path)
                return None
            return RouterState.from_json(data)
        except (OSError, ValueError, AttributeError) as exc:
            logger.warning("ignoring the unreadable router state %s: %s", path, exc)
            return None

    def describe(self) -> dict[str, Any]:
        """The router's state for ``llm://models``: whether it is built, ratings, the pacer's target and price."""
        router = self._router
        out: dict[str, Any] = {
            "built": router is not None,
            "target_cost_share": self.settings.llm.router.target_cost_share,
            "min_ratings": ROUTER_MIN_FEEDBACK,
        }
        if router is not None:
            out |= {"ratings": router.bandit.steps, "balanced_lam": router.lam(Policy()), **router.state.to_json()}
            out.pop("lam")
        return out

    def save_state(self) -> None:
        """Write the router's pacer price and cost scale (atomically: a crash leaves the old file or the new one)."""
        router = self._router
        if router is None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        data = {"models": list(router.registry.ids()), **router.state.to_json()}
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{STATE_FILE}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, self.dir / STATE_FILE)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    async def close(self) -> None:
        """Persist what is not saved with every rating (the pacer's price, the cost scale); never raises."""
        try:
            await anyio.to_thread.run_sync(self.save_state)
        except OSError as exc:
            logger.warning("could not save the router state: %s", exc)

    # -- feedback -----------------------------------------------------------------------------------------------

    def remember(
        self, request_id: str, decision: RouteDecision | CascadeDecision | None, user: str, asked: str | None = None
    ) -> None:
        """Keep ``decision`` so a later rating of ``request_id`` can reward it; ``asked`` is the request's
        fingerprint (:func:`hanzo_hub.llm.ratings.fingerprint`), so the same request sent again can rate it."""
        if decision is not None and request_id:
            self.ratings.add(request_id, decision, user, asked)

    def alias(self, request_id: str, of: str) -> None:
        """Let ``request_id`` rate the decision kept under ``of`` (a ``chat`` turn's later steps rate its route)."""
        self.ratings.alias(request_id, of)

    def regenerated(self, user: str, asked: str | None) -> tuple[str, float] | None:
        """The earlier, unrated request of ``user`` that asked the same within ``llm.router.regeneration_window``
        seconds, and how long ago (``None``: there is none, or the request has no fingerprint)."""
        if asked is None:
            return None
        return self.ratings.regenerated(user, asked, self.settings.llm.router.regeneration_window)

    async def feedback(self, request_id: str, quality: float, user: str, implicit: str | None = None) -> str:
        """Reward the decision of ``request_id`` with ``quality`` in [0, 1]; returns the model that was rated.
        ``implicit`` names the signal when the rating was not given by the user ('regenerated').

        Raises:
            CompletionError: the request is unknown (or another user's), was not routed, or was rated already.
        """
        router = self._router
        known = self.ratings.get(request_id)
        if router is None and known is not None and known.user == user:
            raise CompletionError("the router is not available; the rating was not used")
        held = self.ratings.take(request_id, user, quality)  # from here on a second rating is refused
        decision = held.decision
        assert router is not None  # a decision is only held once the router made it
        try:
            if isinstance(decision, CascadeDecision):
                assert self._cascade is not None
                await anyio.to_thread.run_sync(self._cascade.feedback, decision, quality, limiter=router.limiter)
            else:
                await router.afeedback(decision, quality)
        except BaseException:
            held.rating = None  # not applied: it may be given again
            raise
        cascaded = isinstance(decision, CascadeDecision)
        line: dict[str, Any] = {"request_id": request_id, "model": decision.model, "quality": quality, "user": user}
        if cascaded:
            line["cascade"] = True
        if implicit:
            line["implicit"] = implicit
        await anyio.to_thread.run_sync(self._persist, router, line, cascaded)
        return decision.model

    def _persist(self, router: Router, line: dict[str, Any], cascaded: bool) -> None:
        """Save the learned state and log the rating. The rating is already in use: a failing disk (full, read-only)
        only means it is not kept past a restart, which is logged, not raised to the client."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            router.bandit.save(self.dir / ROUTER_FILE)
            self.save_state()
            if cascaded and self._cascade is not None:
                for rung, escalator in enumerate(self._cascade.escalators):
                    escalator.save(self.dir / escalator_file(rung))
        except OSError as exc:
            logger.warning("rating of %s applied but the router state was not saved: %s", line["request_id"], exc)
        self._feedback_log.write((json.dumps({"ts": time.time(), **line}) + "\n").encode())
