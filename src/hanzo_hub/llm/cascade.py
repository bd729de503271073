"""A cheap-to-best cascade: call the fast model, escalate while a quality estimate falls below a threshold.

The quality estimator is a caller-supplied function (a verifier, a reward model, a self-check); a cascade is only as
good as that estimator, so the benchmark measures it separately.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from hanzo_hub.errors import ConfigError

__all__ = ["Cascade", "CascadeResult", "CascadeStep"]

Complete = Callable[[str], Awaitable[tuple[str, float]]]
"""model id -> (answer, cost in USD)."""
Estimate = Callable[[str, str], Awaitable[float]]
"""(model id, answer) -> estimated quality in [0, 1]."""


@dataclass(frozen=True)
class CascadeStep:
    model: str
    answer: str
    cost: float
    estimate: float | None


@dataclass(frozen=True)
class CascadeResult:
    answer: str
    model: str
    cost: float
    steps: tuple[CascadeStep, ...]


class Cascade:
    """``models`` from cheapest to best; ``thresholds[i]`` is the estimate needed to stop at ``models[i]``."""

    def __init__(self, models: Sequence[str], thresholds: Sequence[float]) -> None:
        if not models or len(thresholds) != len(models) - 1:
            raise ConfigError("a cascade needs one threshold per model except the last")
        self.models = tuple(models)
        self.thresholds = tuple(thresholds)

    async def run(self, complete: Complete, estimate: Estimate) -> CascadeResult:
        """Escalate until an answer's estimate meets its threshold; the last model's answer is final."""
        steps: list[CascadeStep] = []
        for i, model in enumerate(self.models):
            answer, cost = await complete(model)
            last = i == len(self.models) - 1
            score = None if last else await estimate(model, answer)
            steps.append(CascadeStep(model, answer, cost, score))
            if last or (score is not None and score >= self.thresholds[i]):
                break
        final = steps[-1]
        return CascadeResult(final.answer, final.model, sum(s.cost for s in steps), tuple(steps))
