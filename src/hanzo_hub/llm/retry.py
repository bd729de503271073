"""When to try a provider again: exponential backoff with jitter, ``Retry-After``, and deployment cooldowns."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Cooldowns", "RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``retries`` more attempts per deployment after the first, waits doubling from ``backoff_base``.

    A provider's ``Retry-After`` is honoured when it asks for at most ``max_retry_after`` seconds; a longer wait is
    not waited out: the deployment cools down for that long and the next candidate answers instead.
    """

    retries: int = 2
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    max_retry_after: float = 30.0
    cooldown: float = 30.0

    def backoff(self, retry: int, rng: random.Random) -> float:
        """Seconds before retry number ``retry`` (0-based): "equal jitter", half fixed and half random."""
        ceiling = min(self.backoff_max, self.backoff_base * 2.0**retry)
        return ceiling / 2 + rng.uniform(0, ceiling / 2)

    def wait(self, retry: int, retry_after: float | None, rng: random.Random) -> float | None:
        """Seconds to wait before retry ``retry``, or ``None`` when the provider asked for too long a wait."""
        if retry_after is not None and retry_after > self.max_retry_after:
            return None
        return max(self.backoff(retry, rng), retry_after or 0.0)


@dataclass
class Cooldowns:
    """Deployments that failed recently, each skipped until its time is up (monotonic clock)."""

    clock: Callable[[], float] = time.monotonic
    _until: dict[str, float] = field(default_factory=dict)

    def cool(self, deployment: str, seconds: float) -> None:
        """Skip ``deployment`` for ``seconds`` (a longer running cooldown is kept)."""
        until = self.clock() + seconds
        self._until[deployment] = max(until, self._until.get(deployment, 0.0))

    def clear(self, deployment: str) -> None:
        """``deployment`` answered: it is healthy again."""
        self._until.pop(deployment, None)

    def remaining(self, deployment: str) -> float:
        """Seconds ``deployment`` stays cooling (0 when it is available)."""
        left = self._until.get(deployment, 0.0) - self.clock()
        if left <= 0:
            self._until.pop(deployment, None)
            return 0.0
        return left
