"""Retention: relevance decays for memories nobody reads, and long-forgotten memories are deleted.

Both rules look at the last access (or creation): after ``decay_after_days`` without access, relevance is
multiplied by ``decay_factor`` once per further period (so a memory decays 10% per 90 idle days by default);
after ``delete_after_days`` it is deleted. The clock is injected, so tests move time instead of waiting.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from hanzo_hub.config import MemorySettings
from hanzo_hub.memory.models import MemoryEntry

DAY = 86400.0
DECAYED_AT_TAG = "_decay_periods"


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """Entries whose relevance changes and ids to delete."""

    decayed: list[MemoryEntry]
    expired: list[str]


def idle_days(entry: MemoryEntry, now: float) -> float:
    """Days since the entry was last read (or written)."""
    return max(0.0, now - max(entry.accessed_at, entry.created_at)) / DAY


def plan_retention(entries: Iterable[MemoryEntry], now: float, settings: MemorySettings) -> RetentionPlan:
    """Decide decay and deletion for ``entries`` at time ``now``.

    Decay is idempotent: the relevance target is ``base * factor ** periods`` where ``periods`` counts whole idle
    periods, and the periods already applied are remembered in the entry's tags, so running twice changes nothing.
    """
    decayed: list[MemoryEntry] = []
    expired: list[str] = []
    for entry in entries:
        days = idle_days(entry, now)
        if days >= settings.delete_after_days:
            expired.append(entry.id)
            continue
        periods = math.floor(days / settings.decay_after_days)
        applied = _applied(entry)
        if periods > applied:
            relevance = entry.relevance * settings.decay_factor ** (periods - applied)
            tags = (*tuple(t for t in entry.tags if not t.startswith(DECAYED_AT_TAG)), f"{DECAYED_AT_TAG}={periods}")
            decayed.append(entry.evolve(relevance=relevance, tags=tags))
    return RetentionPlan(decayed, expired)


def _applied(entry: MemoryEntry) -> int:
    for tag in entry.tags:
        if tag.startswith(DECAYED_AT_TAG + "="):
            return int(tag.partition("=")[2])
    return 0
