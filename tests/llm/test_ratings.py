"""Routed decisions awaiting a rating: one rating each, shared by aliases, and regeneration within a window."""

import pytest

from hanzo_hub.errors import CompletionError
from hanzo_hub.llm.ratings import Ratings, fingerprint
from hanzo_hub.llm.types import ChatMessage, ToolCall


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_decision_takes_one_rating_from_its_own_user() -> None:
    ratings: Ratings[str] = Ratings(10, Clock())
    ratings.add("r1", "decision-1", "ana", None)
    with pytest.raises(CompletionError, match="no routed request 'r1' of yours"):
        ratings.take("r1", "bob", 1.0)
    with pytest.raises(CompletionError, match="no routed request 'nope'"):
        ratings.take("nope", "ana", 1.0)
    assert ratings.take("r1", "ana", 0.75).decision == "decision-1"
    with pytest.raises(CompletionError, match=r"already rated 0\.75; a routed answer takes one rating"):
        ratings.take("r1", "ana", 0.0)


def test_an_alias_rates_the_same_decision_once() -> None:
    ratings: Ratings[str] = Ratings(10, Clock())
    ratings.add("step-1", "route", "ana", "asked")
    ratings.alias("step-3", "step-1")
    ratings.alias("other", "unknown")  # nothing to alias
    ratings.alias("step-1", "step-1")
    assert ratings.get("other") is None
    assert ratings.take("step-3", "ana", 1.0).decision == "route"
    with pytest.raises(CompletionError, match="already rated"):
        ratings.take("step-1", "ana", 1.0)


def test_the_same_request_again_within_the_window_names_the_latest_unrated_one() -> None:
    clock = Clock()
    ratings: Ratings[str] = Ratings(10, clock)
    ratings.add("a", "d-a", "ana", "same")
    clock.now += 100
    ratings.add("b", "d-b", "ana", "same")
    ratings.add("c", "d-c", "bob", "same")  # another user's
    ratings.add("d", "d-d", "ana", "different")
    ratings.add("e", "d-e", "ana", None)  # no fingerprint: never a match
    clock.now += 30
    assert ratings.regenerated("ana", "same", 600) == ("b", 30)
    ratings.take("b", "ana", 0.0)
    assert ratings.regenerated("ana", "same", 600) == ("a", 130)  # b is rated: the one before it
    assert ratings.regenerated("ana", "same", 100) is None  # a is older than the window
    assert ratings.regenerated("ana", "same", 0) is None  # off
    assert ratings.regenerated("carl", "same", 600) is None
    assert ratings.regenerated("bob", "same", 600) == ("c", 30)


def test_a_late_alias_does_not_hide_newer_requests_or_revive_an_old_decision() -> None:
    clock = Clock()
    ratings: Ratings[str] = Ratings(10, clock)
    ratings.add("turn-1", "route-1", "ana", "turn")
    clock.now += 650
    ratings.add("other", "route-2", "ana", "question")
    clock.now += 50
    ratings.alias("turn-1-last-step", "turn-1")  # a long turn ends: its id is added after "other"
    clock.now += 10
    assert ratings.regenerated("ana", "question", 600) == ("other", 60)
    assert ratings.regenerated("ana", "turn", 600) is None  # the turn was decided 710 s ago


def test_oldest_decisions_go_first_past_the_limit() -> None:
    ratings: Ratings[int] = Ratings(3, Clock())
    for i in range(5):
        ratings.add(f"r{i}", i, "ana", None)
    assert len(ratings) == 3
    assert ratings.get("r1") is None
    assert ratings.get("r4") is not None


def test_fingerprint_covers_roles_content_and_tool_calls() -> None:
    base = [ChatMessage(role="user", content="write a haiku")]
    assert fingerprint(base) == fingerprint([ChatMessage(role="user", content="write a haiku")])
    assert fingerprint(base) != fingerprint([ChatMessage(role="user", content="write a haiku!")])
    assert fingerprint(base) != fingerprint([ChatMessage(role="system", content="write a haiku")])
    assert fingerprint(base) != fingerprint(base, "chat")
    called = ChatMessage(role="assistant", tool_calls=(ToolCall(id="c1", name="echo", arguments={"x": 1}),))
    other = ChatMessage(role="assistant", tool_calls=(ToolCall(id="c1", name="echo", arguments={"x": 2}),))
    assert fingerprint([*base, called]) != fingerprint([*base, other])
