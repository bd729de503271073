"""Per-user rate limits: a token bucket for requests and one for tokens (prompt plus ``max_tokens``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from hanzo_hub.config.llm import RateLimitSettings, RateLimitSpec
from hanzo_hub.errors import RateLimited

__all__ = ["RateLimiter", "TokenBucket"]


@dataclass
class TokenBucket:
    """``capacity`` units, refilled at ``capacity`` per minute; starts full."""

    capacity: float
    level: float
    stamp: float

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.capacity / 60)
        self.stamp = now

    def shortfall(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` units are available (0: now); an amount above capacity waits for a full one."""
        self._refill(now)
        missing = min(amount, self.capacity) - self.level
        return 0.0 if missing <= 0 else missing * 60 / self.capacity

    def take(self, amount: float) -> None:
        self.level -= min(amount, self.capacity)


class RateLimiter:
    """Token buckets per user, configured by ``llm.rate_limits``."""

    def __init__(self, settings: RateLimitSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def _spec(self, user: str) -> RateLimitSpec:
        return self.settings.users.get(user, self.settings.default)

    def _bucket(self, user: str, what: str, capacity: float, now: float) -> TokenBucket:
        key = (user, what)
        bucket = self._buckets.get(key)
        if bucket is None or bucket.capacity != capacity:
            bucket = self._buckets[key] = TokenBucket(capacity, capacity, now)
        return bucket

    def acquire(self, user: str, tokens: int) -> None:
        """Take one request and ``tokens`` tokens from ``user``'s buckets.

        Raises:
            RateLimited: a bucket is short; nothing is taken. ``retry_after`` says how long to wait.
        """
        spec = self._spec(user)
        now = self._clock()
        wanted = [("requests", spec.requests_per_minute, 1.0), ("tokens", spec.tokens_per_minute, float(tokens))]
        buckets = []
        for what, capacity, amount in wanted:
            if capacity is None:
                continue
            bucket = self._bucket(user, what, capacity, now)
            wait = bucket.shortfall(amount, now)
            if wait > 0:
                raise RateLimited(user, what, wait)
            buckets.append((bucket, amount))
        for bucket, amount in buckets:
            bucket.take(amount)
