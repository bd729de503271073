"""The cap on running servers (``backends.max_running``): who may start, and which idle server makes room.

Starters wait in one first-come queue, so under a storm of starts every server gets its turn: only the head of
the queue takes a free slot or evicts, and the others wait behind it (an unordered wake-up let a server lose the
race again and again until its start timed out).

The victim is the least recently used idle server (nothing in flight, nobody waiting for it, no state a stop would
lose: the hub's memory server while sessions keep memories in it) among those that have
been idle at least as long as their last start took: evicting a server used a moment ago, to start another, and
then starting it again costs two starts where waiting costs at most one (the ski-rental rule, which keeps the total
within twice the best possible). When every idle server is still that fresh, the head waits until the first of
them ripens, or until anything frees up sooner.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

import anyio

from hanzo_hub.backends.supervisor import State, Supervisor

logger = logging.getLogger(__name__)


class RunningSlots:
    """At most ``limit`` servers running or starting; evicts ripe idle ones to make room, first come first served."""

    def __init__(self, limit: int, clock: Callable[[], float]) -> None:
        self._limit = limit
        self._clock = clock
        self.running: set[Supervisor] = set()
        self._queue: deque[Supervisor] = deque()
        self._changed = anyio.Event()

    async def acquire(self, supervisor: Supervisor) -> None:
        """Wait for room to run ``supervisor``, evicting an idle server when its turn comes (unbounded: the caller
        bounds it)."""
        if len(self.running) < self._limit and not self._queue:
            self.running.add(supervisor)
            return
        self._queue.append(supervisor)
        try:
            while True:
                patience: float | None = None
                if self._queue[0] is supervisor:
                    if len(self.running) < self._limit:
                        break
                    victim, patience = self._victim()
                    if victim is not None:
                        logger.info("stopping idle server %s to make room for %s", victim.name, supervisor.name)
                        await victim.stop()
                        continue
                changed = self._changed
                with anyio.move_on_after(patience):
                    await changed.wait()
        finally:
            self._queue.remove(supervisor)
            self._wake()  # the next in line is the head now
        self.running.add(supervisor)

    def release(self, supervisor: Supervisor) -> None:
        """``supervisor`` stopped running."""
        self.running.discard(supervisor)
        self._wake()

    def idle(self, supervisor: Supervisor) -> None:
        """``supervisor`` finished its last request, so it may be evicted now."""
        if self._queue:  # (every call ends here: no new event unless someone waits)
            self._wake()

    def _victim(self) -> tuple[Supervisor | None, float | None]:
        """The server to evict now, or ``None`` and how long until one ripens (``None``: none is idle)."""
        now = self._clock()
        idle = [s for s in self.running if s.in_flight == 0 and s.state is State.RUNNING and not s.holding]
        if not idle:
            return None, None
        ripe = [s for s in idle if now - s.last_used >= s.start_cost]
        if ripe:  # the least recently used of them
            return min(ripe, key=lambda s: s.last_used), None
        return None, max(min(s.last_used + s.start_cost for s in idle) - now, 0.0)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
