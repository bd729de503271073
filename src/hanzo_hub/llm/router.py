"""The router: features -> category -> bandit decision under the request's policy and limits.

Policies trade quality against cost through ``lam`` in the bandit's reward ``quality - lam * cost / cost_scale``
(quality per dollar is unbounded as cost goes to zero, so it is not used directly). ``cost_scale`` is a running
average of the dearest eligible model's cost, the same for every request, so a long prompt's dollars weigh more than
a short one's: with a budget, that is the quality-per-dollar optimum (a knapsack ranked by gain per extra dollar).
When the request gives no answer-length estimate, each model's expected cost uses the length the bandit learned
from reported usage. ``pinned`` skips the bandit. A :class:`CostPacer` turns a target cost share (spend / the
dearest model's spend) into an adaptive ``lam`` (a dual-ascent budget controller).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import anyio
import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from hanzo_hub.errors import ConfigError, NoEligibleModel
from hanzo_hub.llm.bandit import NeuralThompsonBandit
from hanzo_hub.llm.classify import CategoryClassifier
from hanzo_hub.llm.registry import ModelRegistry, ModelSpec

__all__ = ["POLICY_LAMBDA", "CostPacer", "Policy", "RouteDecision", "RouteRequest", "Router", "RouterState"]

logger = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float32]

POLICY_LAMBDA: dict[str, float] = {"quality_first": 0.02, "balanced": 0.1, "cost_first": 0.5}
PACER_STEP = 0.02
DEFAULT_TOKENS_OUT = 256.0
COST_SCALE_EMA = 0.01


class Policy(BaseModel):
    """A user's routing policy and hard limits for one request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["quality_first", "balanced", "cost_first", "pinned"] = "balanced"
    model: str | None = Field(default=None, description="the model for kind='pinned'")
    max_cost: float | None = Field(default=None, ge=0, description="USD per request")
    max_latency_ms: float | None = Field(default=None, ge=0)
    lam: float | None = Field(default=None, ge=0, description="overrides the kind's cost weight")


@dataclass(frozen=True)
class RouteRequest:
    """What the router sees: the shared query embedding, token estimates and required capabilities.

    ``tokens_out=None`` lets the router use the answer length it learned per model (256 until it has reports).
    """

    embedding: FloatArray
    tokens_in: float
    tokens_out: float | None = None
    needs: frozenset[str] = frozenset()
    policy: Policy = field(default_factory=Policy)


@dataclass(frozen=True)
class RouteDecision:
    """The chosen model, why, and what it is expected to cost."""

    model: str
    category: str
    reason: str
    est_cost: float
    features: FloatArray = field(repr=False)
    arm: int = -1


class CostPacer:
    """Adapts ``lam`` so that spend / reference spend (the dearest eligible model's cost) tracks ``target``."""

    def __init__(self, target: float, lam: float = POLICY_LAMBDA["balanced"], step: float = PACER_STEP) -> None:
        self.target, self.lam, self.step = target, lam, step

    def observe(self, spent: float, reference: float = 1.0) -> None:
        """One request's cost and its reference cost, both in units of the router's cost scale."""
        self.lam = max(0.0, self.lam + self.step * (spent - self.target * reference))


@dataclass(frozen=True)
class RouterState:
    """What the router learned besides its bandit: the pacer's ``lam`` and the running cost scale (persisted)."""

    lam: float | None
    cost_scale: float | None

    def to_json(self) -> dict[str, float | None]:
        return {"lam": self.lam, "cost_scale": self.cost_scale}

    @classmethod
    def from_json(cls, data: object) -> RouterState:
        """Parse a saved state; anything but finite non-negative numbers (or null) is a ``ValueError``."""
        if not isinstance(data, dict):
            raise ValueError("a router state must be a JSON object")
        values = []
        for key in ("lam", "cost_scale"):
            v = data.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf")):
                raise ValueError(f"router state: '{key}' must be a finite number >= 0 or null, not {v!r}")
            values.append(None if v is None else float(v))
        return cls(values[0], values[1] or None)


class Router:
    """Routes requests over the registry's models with a category classifier and a neural Thompson bandit."""

    def __init__(
        self,
        registry: ModelRegistry,
        classifier: CategoryClassifier,
        bandit: NeuralThompsonBandit,
        pacer: CostPacer | None = None,
    ) -> None:
        if tuple(registry.ids()) != bandit.arms:
            raise ConfigError("the bandit's arms must be the registry's models, in order")
        self.registry = registry
        self.models: list[ModelSpec] = list(registry)
        self.classifier = classifier
        self.bandit = bandit
        self.pacer = pacer
        self.cost_scale: float | None = None
        self.limiter = anyio.CapacityLimiter(1)
        """One thread at a time touches the bandit (routing, feedback, the cascade's decisions)."""

    def features(self, embedding: FloatArray) -> tuple[FloatArray, str]:
        """Bandit features (embedding ++ category probabilities) and the top category."""
        probs = self.classifier.probabilities(embedding)
        category = self.classifier.categories[int(np.argmax(probs))]
        return np.concatenate([embedding, probs]).astype(np.float32), category

    def _eligible(
        self, req: RouteRequest, costs: FloatArray, tokens_out: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.bool_]:
        p = req.policy
        ok = [
            m.context_window >= req.tokens_in + o
            and req.needs <= m.capabilities
            and (p.max_cost is None or c <= p.max_cost)
            and (p.max_latency_ms is None or m.latency_ms <= p.max_latency_ms)
            for m, c, o in zip(self.models, costs, tokens_out, strict=True)
        ]
        return np.array(ok, bool)

    def expected_costs(self, x: FloatArray, req: RouteRequest) -> tuple[FloatArray, npt.NDArray[np.float64]]:
        """Per-model expected cost and answer length (the request's, or the learned one)."""
        if req.tokens_out is not None:
            out = np.full(len(self.models), req.tokens_out)
        else:
            out = self.bandit.expected_tokens_out(x, DEFAULT_TOKENS_OUT)
        costs = np.array([m.cost(req.tokens_in, o) for m, o in zip(self.models, out, strict=True)], np.float32)
        return costs, out

    def route(self, req: RouteRequest) -> RouteDecision:
        """Choose a model (synchronous and cheap: one classifier product and one MLP forward pass).

        Raises:
            NoEligibleModel: no model satisfies the limits, or the pinned model is unknown or ineligible.
        """
        x, category = self.features(req.embedding)
        costs, out = self.expected_costs(x, req)
        eligible = self._eligible(req, costs, out)
        if req.policy.kind == "pinned":
            ids = self.registry.ids()
            if req.policy.model not in ids or not eligible[ids.index(req.policy.model)]:
                raise NoEligibleModel(f"pinned model '{req.policy.model}' is unknown or outside the limits")
            arm = ids.index(req.policy.model)
            return RouteDecision(self.models[arm].id, category, "pinned", float(costs[arm]), x, arm)
        if not eligible.any():
            raise NoEligibleModel("no configured model meets the request's cost, latency, context and capabilities")
        lam = self.lam(req.policy)
        top, scale = self.scale(costs, eligible)
        arm, why = self.bandit.choose(x, costs, lam, eligible, cost_scale=scale)
        self.bandit.record_pull(arm)
        self.spent(float(costs[arm]), top, req.policy)
        reason = f"{why}, policy={req.policy.kind}, lam={lam:.3f}, category={category}"
        return RouteDecision(self.models[arm].id, category, reason, float(costs[arm]), x, arm)

    def scale(self, costs: FloatArray, eligible: npt.NDArray[np.bool_]) -> tuple[float, float]:
        """The dearest eligible model's cost for this request, and the running cost scale updated with it."""
        top = max(float(costs[eligible].max()), 1e-12)
        scale = top if self.cost_scale is None else self.cost_scale + COST_SCALE_EMA * (top - self.cost_scale)
        self.cost_scale = scale
        return top, scale

    def spent(self, cost: float, top: float, policy: Policy) -> None:
        """Tell the pacer what a request priced by it cost against its dearest option (in dollars).

        Requests under another policy (or an explicit ``lam``) are not paced, so they do not move its price.
        """
        if self.pacer is not None and self.cost_scale and self.paced(policy):
            self.pacer.observe(cost / self.cost_scale, top / self.cost_scale)

    def paced(self, policy: Policy) -> bool:
        """Whether ``policy``'s price of a dollar is the pacer's (``balanced`` with no explicit ``lam``)."""
        return self.pacer is not None and policy.kind == "balanced" and policy.lam is None

    def lam(self, policy: Policy) -> float:
        """The price of a dollar (in quality units per cost scale) under ``policy``."""
        if policy.lam is not None:
            return policy.lam
        if self.pacer is not None and policy.kind == "balanced":
            return self.pacer.lam
        return POLICY_LAMBDA[policy.kind]

    @property
    def state(self) -> RouterState:
        """The pacer's price and the cost scale, to persist beside the bandit."""
        return RouterState(self.pacer.lam if self.pacer else None, self.cost_scale)

    def restore(self, state: RouterState) -> None:
        """Continue from a saved :attr:`state` (a saved ``lam`` is ignored when this router has no pacer)."""
        if self.pacer is not None and state.lam is not None:
            self.pacer.lam = state.lam
        self.cost_scale = state.cost_scale

    def feedback(self, decision: RouteDecision, quality: float, tokens_out: float | None = None) -> None:
        """Reward in [0, 1] for a routed request: an explicit rating, or an implicit signal (regeneration = 0).

        ``tokens_out`` (the answer's reported length) teaches the per-model length estimate.
        """
        if decision.arm >= 0:
            self.bandit.update(decision.features, decision.arm, quality, tokens_out)

    async def aroute(self, req: RouteRequest) -> RouteDecision:
        """:meth:`route` in a worker thread (torch is synchronous)."""
        return await anyio.to_thread.run_sync(self.route, req, limiter=self.limiter)

    async def afeedback(self, decision: RouteDecision, quality: float, tokens_out: float | None = None) -> None:
        """:meth:`feedback` in a worker thread (it may train)."""
        await anyio.to_thread.run_sync(self.feedback, decision, quality, tokens_out, limiter=self.limiter)
