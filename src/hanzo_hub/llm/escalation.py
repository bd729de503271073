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
    """One cascaded request so far: the route of the answer that stands, and every escalation decision on the way.

    ``steps`` holds ``(rung, decision)`` in order: rung 0 read the cheapest model's answer, rung 1 the next model's.
    ``extra_cost`` is the expected cost of the models asked after the first one (0 when the first answer was kept).
    """

    route: RouteDecision
    steps: tuple[tuple[int, EscalationDecision], ...]
    extra_cost: float

    @property
    def escalation(self) -> EscalationDecision:
        """The last decision (whether the answer of ``steps[-1]``'s rung was escalated)."""
        return self.steps[-1][1]

    @property
    def model(self) -> str:
        """The model whose answer the user got."""
        return self.route.model


class LearnedCascade:
    """Cheap model first for the router's ``categories``, then up a ladder of models while the escalators say so.

    The ladder is the cheapest eligible model, a mid-tier model when one sits between, and the best one (fast, then
    mid, then best). Each rung has its own :class:`Escalator` (``escalators[0]`` reads the cheapest model's answers,
    ``escalators[1]`` the next rung's; made on first use), since the same checks mean less of a stronger model.
    It prices dollars with the router (its policy ``lam`` and running cost scale) and tells the router's pacer what
    each cascaded request spent, so cascaded and routed requests share one budget controller. A rating trains every
    escalator that decided on the way and, for the model whose answer was rated, the router's bandit.
    """

    def __init__(self, router: Router, escalator: Escalator, categories: frozenset[str], *more: Escalator) -> None:
        self.router = router
        self.escalators: list[Escalator] = [escalator, *more]
        self.categories = categories

    @property
    def escalator(self) -> Escalator:
        """The first rung's escalator (it reads the cheapest model's answers)."""
        return self.escalators[0]

    def escalator_at(self, rung: int) -> Escalator:
        """The escalator of ``rung``, made (untrained) when it is first needed."""
        while len(self.escalators) <= rung:
            template = self.escalators[0]
            self.escalators.append(Escalator(template.dim - len(ANSWER_FEATURES), template.bandit.settings))
        return self.escalators[rung]

    def applies(self, category: str) -> bool:
        return category in self.categories

    def decide(
        self,
        req: RouteRequest,
        features: tuple[FloatArray, str],
        question: str,
        answered: str,
        next_model: str,
        answer: str,
        *,
        earlier: CascadeDecision | None = None,
        final: bool = True,
    ) -> CascadeDecision:
        """After ``answered`` answered ``question`` with ``answer``: keep it, or escalate to ``next_model``.

        ``features`` is what :meth:`Router.features` gives for ``req.embedding`` (the caller has it already).
        ``earlier`` is the decision that escalated to ``answered`` (``None`` on the first rung); ``final`` says
        whether ``next_model`` is the ladder's last rung.
        """
        router = self.router
        x, category = features
        n_cat = len(router.classifier.categories)
        costs, _ = router.expected_costs(x, req)
        ids = router.registry.ids()
        ai, ni = ids.index(answered), ids.index(next_model)
        top, scale = router.scale(costs, np.ones(len(ids), bool))
        rung = 0 if earlier is None else len(earlier.steps)
        escalator = self.escalator_at(rung)
        xe = escalator.features(question, answer, x[-n_cat:])
        extra = float(costs[ni])
        esc = escalator.decide(xe, extra, router.lam(req.policy), scale)
        # the pacer hears each request once: the first rung reports the first answer and the reference cost, later
        # rungs only what they add (observe is linear, so the parts sum to one observation of the whole)
        paid = (float(costs[ai]) if earlier is None else 0.0) + (extra if esc.escalate else 0.0)
        router.spent(paid, top if earlier is None else 0.0, req.policy)
        model, arm = (next_model, ni) if esc.escalate else (answered, ai)
        if final or not esc.escalate:  # the answer that stands is decided: count its model once
            router.bandit.record_pull(arm)
        verb = "escalated from" if esc.escalate else "kept"
        reason = f"{verb} {answered} ({esc.reason})"
        if earlier is None:
            reason = f"cascade: {reason}"
        else:
            reason = f"{earlier.route.reason.removesuffix(f', category={category}')}, then {reason}"
        route = RouteDecision(model, category, f"{reason}, category={category}", float(costs[arm]), x, arm)
        spent = (earlier.extra_cost if earlier is not None else 0.0) + (extra if esc.escalate else 0.0)
        steps = (earlier.steps if earlier is not None else ()) + ((rung, esc),)
        return CascadeDecision(route, steps, spent)

    def feedback(self, decision: CascadeDecision, quality: float, tokens_out: float | None = None) -> None:
        """A rating of the answer given: trains each escalator that decided, and the router's bandit for that model."""
        for rung, esc in decision.steps:
            self.escalator_at(rung).feedback(esc, quality)
        self.router.feedback(decision.route, quality, tokens_out)
