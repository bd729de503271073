"""The cascade's learned step: after the cheap model answered, keep its answer or pay for the best model's.

An :class:`Escalator` is a two-arm neural Thompson bandit (:class:`~hanzo_hub.llm.bandit.NeuralThompsonBandit`, arms
``keep`` and ``escalate``) whose context is the cheap answer's checks (:mod:`hanzo_hub.llm.answer_check`) and the
query's category probabilities. Its reward is the quality of the answer the user got: the cheap one when it kept
it, the best model's when it escalated; so it learns, from bandit feedback only, where the cheap model's answers go
wrong. It escalates when the sampled gain beats ``lam * extra_cost / cost_scale``, the router's own price of a
dollar, so a cascade and a direct route trade quality for cost the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from hanzo_hub.llm.answer_check import ANSWER_FEATURES, answer_features
from hanzo_hub.llm.bandit import BanditSettings, NeuralThompsonBandit
from hanzo_hub.llm.router import RouteDecision, Router, RouteRequest

__all__ = [
    "ESCALATION_ARMS",
    "ESCALATION_SETTINGS",
    "CascadeDecision",
    "EscalationDecision",
    "Escalator",
    "LearnedCascade",
]

FloatArray = npt.NDArray[np.float32]

ESCALATION_ARMS = ("keep", "escalate")
ESCALATION_SETTINGS = BanditSettings(knn_k=0)
"""The router's bandit settings without the neighbour posterior (the answer checks are not an embedding)."""


@dataclass(frozen=True)
class EscalationDecision:
    """Whether the cheap answer was escalated, why, and the features the rating will train on."""

    escalate: bool
    reason: str
    gain: float
    features: FloatArray = field(repr=False)

    @property
    def arm(self) -> int:
        return int(self.escalate)


class Escalator:
    """Keep-or-escalate decisions for a cascade, learned from ratings of the answers given."""

    def __init__(
        self, n_categories: int, settings: BanditSettings | None = None, *, bandit: NeuralThompsonBandit | None = None
    ) -> None:
        self.dim = len(ANSWER_FEATURES) + n_categories
        self.bandit = bandit or NeuralThompsonBandit(ESCALATION_ARMS, self.dim, settings or ESCALATION_SETTINGS)
        if self.bandit.arms != ESCALATION_ARMS or self.bandit.dim != self.dim:
            raise ValueError("the saved escalation model does not fit these features")

    def features(self, question: str, answer: str, category_probs: FloatArray) -> FloatArray:
        """The escalation context: the answer's checks, then the query's category probabilities."""
        return np.concatenate([answer_features(question, answer), category_probs]).astype(np.float32)

    def gain(self, x: FloatArray) -> npt.NDArray[np.float64]:
        """Mean predicted quality gain of escalating, for features ``x`` ((n, dim) -> (n,))."""
        q = self.bandit.quality(x)
        out: npt.NDArray[np.float64] = (q[:, 1] - q[:, 0]).astype(np.float64)
        return out

    def decide(self, x: FloatArray, extra_cost: float, lam: float, cost_scale: float) -> EscalationDecision:
        """Keep or escalate; ``extra_cost`` is the best model's expected cost (the cheap answer is already paid)."""
        costs = np.array([0.0, max(extra_cost, 0.0)], np.float32)
        arm, why = self.bandit.choose(x, costs, lam, np.ones(2, bool), cost_scale=max(cost_scale, 1e-12))
        self.bandit.record_pull(arm)
        gain = float(self.gain(x[None, :])[0])
        return EscalationDecision(bool(arm), f"{why}, predicted gain {gain:+.3f}, lam={lam:.3f}", gain, x)

    def feedback(self, decision: EscalationDecision, quality: float) -> None:
        """The rating of the answer the user got (the cheap one if kept, else the best model's)."""
        self.bandit.update(decision.features, decision.arm, quality)

    def save(self, path: str | Path) -> None:
        self.bandit.save(path)

    @classmethod
    def load(cls, path: str | Path, n_categories: int) -> Escalator:
        return cls(n_categories, bandit=NeuralThompsonBandit.load(path))


@dataclass(frozen=True)
class CascadeDecision:
    """One cascaded request: the cheap model's route decision, the escalation decision, and which model answered."""

    route: RouteDecision
    escalation: EscalationDecision
    extra_cost: float

    @property
    def model(self) -> str:
        """The model whose answer the user got."""
        return self.route.model


class LearnedCascade:
    """Cheap model first for the router's ``categories``; the :class:`Escalator` decides whether the best answers too.

    It prices dollars with the router (its policy ``lam`` and running cost scale) and tells the router's pacer what
    each cascaded request spent, so cascaded and routed requests share one budget controller. A rating trains the
    escalator and, for the model whose answer was rated, the router's bandit.
    """

    def __init__(self, router: Router, escalator: Escalator, categories: frozenset[str]) -> None:
        self.router = router
        self.escalator = escalator
        self.categories = categories

    def applies(self, category: str) -> bool:
        return category in self.categories

    def decide(
        self, req: RouteRequest, features: tuple[FloatArray, str], question: str, cheap: str, best: str, answer: str
    ) -> CascadeDecision:
        """After ``cheap`` answered ``question`` with ``answer``: keep it, or escalate to ``best``.

        ``features`` is what :meth:`Router.features` gives for ``req.embedding`` (the caller has it already).
        """
        router = self.router
        x, category = features
        n_cat = len(router.classifier.categories)
        costs, _ = router.expected_costs(x, req)
        ids = router.registry.ids()
        ci, bi = ids.index(cheap), ids.index(best)
        top, scale = router.scale(costs, np.ones(len(ids), bool))
        xe = self.escalator.features(question, answer, x[-n_cat:])
        extra = float(costs[bi])
        esc = self.escalator.decide(xe, extra, router.lam(req.policy), scale)
        router.spent(float(costs[ci]) + (extra if esc.escalate else 0.0), top, req.policy)
        model, arm = (best, bi) if esc.escalate else (cheap, ci)
        router.bandit.record_pull(arm)
        reason = f"cascade: {'escalated from' if esc.escalate else 'kept'} {cheap} ({esc.reason}), category={category}"
        route = RouteDecision(model, category, reason, float(costs[arm]), x, arm)
        return CascadeDecision(route, esc, extra)

    def feedback(self, decision: CascadeDecision, quality: float, tokens_out: float | None = None) -> None:
        """A rating of the answer given: trains the escalator, and the router's bandit for that model."""
        self.escalator.feedback(decision.escalation, quality)
        self.router.feedback(decision.route, quality, tokens_out)
