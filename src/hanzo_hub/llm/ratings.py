"""Which routed answers may still be rated, and the implicit rating a regenerated request gives.

The router learns one reward per decision. Each routed request's decision is held under its request id (bounded,
oldest first out) with its user, when it was made and a fingerprint of what was asked. A decision takes one rating:
an explicit one (the ``feedback`` tool) or an implicit one. A second is refused, so one answer cannot be counted
twice, by a retry or by a user pressing on the shared router.

Regeneration is the implicit signal: a user who sends exactly the same request again within the window (the same
messages; for the ``chat`` tool the same message and history) did not take the first answer, so that answer's
decision, if still unrated, is rated 0. Several ids can name one decision (a ``chat`` turn's tool-calling steps end
in a request of their own, which rates the turn's routing decision).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Generic, Literal, TypeVar

from pydantic import Field

from hanzo_hub.errors import AlreadyRated, UnknownRequest
from hanzo_hub.llm.types import ChatMessage

__all__ = ["Held", "Rating", "Ratings", "fingerprint", "quality_of"]

D = TypeVar("D")

Rating = Annotated[float, Field(ge=0, le=1)] | Literal["regenerated"]
"""What a user rates an answer with (the ``feedback`` tool, ``POST /v1/feedback``): 0 (bad) to 1 (good), or
'regenerated'."""


def quality_of(rating: float | str) -> float:
    """The reward a :data:`Rating` gives the router ('regenerated' is 0)."""
    return 0.0 if rating == "regenerated" else float(rating)


def fingerprint(messages: Sequence[ChatMessage], *extra: str) -> str:
    """A digest of what was asked: every message as sent (role, content, tool calls), plus ``extra`` strings."""
    body = json.dumps([m.model_dump(mode="json") for m in messages] + list(extra), sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass(eq=False)
class Held(Generic[D]):
    """One routed decision awaiting its rating."""

    decision: D
    user: str
    asked: str | None
    """The fingerprint of the request (``None``: never matched as a regeneration, e.g. a sampling request)."""
    at: float
    rating: float | None = None


class Ratings(Generic[D]):
    """Routed decisions by request id, at most ``limit`` of them; each takes one rating."""

    def __init__(self, limit: int, clock: Callable[[], float]) -> None:
        self._limit = limit
        self._clock = clock
        self._held: OrderedDict[str, tuple[Held[D], float]] = OrderedDict()
        """request id -> (its decision, when the id was added), in the order added."""

    def __len__(self) -> int:
        return len(self._held)

    def add(self, request_id: str, decision: D, user: str, asked: str | None) -> None:
        """Hold ``decision`` under ``request_id`` until it is rated or pushed out."""
        self._put(request_id, Held(decision, user, asked, self._clock()))

    def alias(self, request_id: str, of: str) -> None:
        """Let ``request_id`` rate the decision held under ``of`` (nothing if ``of`` is not held)."""
        held = self.get(of)
        if held is not None and request_id and request_id != of:
            self._put(request_id, held)

    def _put(self, request_id: str, held: Held[D]) -> None:
        self._held[request_id] = (held, self._clock())
        self._held.move_to_end(request_id)
        while len(self._held) > self._limit:
            self._held.popitem(last=False)

    def take(self, request_id: str, user: str, rating: float) -> Held[D]:
        """Record ``rating`` for ``request_id``'s decision and return it, to be rewarded.

        Raises:
            UnknownRequest: no such decision of ``user`` is held.
            AlreadyRated: it was rated already.
        """
        held = self.get(request_id)
        if held is None or held.user != user:
            raise UnknownRequest(f"no routed request '{request_id}' of yours is known (it may be too old)")
        if held.rating is not None:
            raise AlreadyRated(
                f"request '{request_id}' was already rated {held.rating:g}; a routed answer takes one rating"
            )
        held.rating = rating
        return held

    def regenerated(self, user: str, asked: str, window: float) -> tuple[str, float] | None:
        """The latest unrated request of ``user`` asking the same (``asked``) within ``window`` seconds, and how long
        ago, or ``None``."""
        if window <= 0:
            return None
        now = self._clock()
        for request_id, (held, added) in reversed(self._held.items()):
            if now - added > window:
                break  # ids are kept in the order added, and none was added before its decision was made
            if held.user == user and held.asked == asked and held.rating is None and now - held.at <= window:
                return request_id, now - held.at
        return None

    def get(self, request_id: str) -> Held[D] | None:
        """The decision ``request_id`` names, if held."""
        entry = self._held.get(request_id)
        return None if entry is None else entry[0]
