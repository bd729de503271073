"""Time references in recall queries: the window each names, and the bonus recall gives memories made then."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from hanzo_hub.config import MemorySettings
from hanzo_hub.memory import MemoryScope, MemoryService
from hanzo_hub.memory.timeref import DAY, time_window
from hanzo_hub.vectors.fake import HashEmbedder

NOW = datetime(2026, 12, 3, 15, 30, tzinfo=UTC).timestamp()  # a Thursday
MIDNIGHT = datetime(2026, 12, 3, tzinfo=UTC).timestamp()


def days_before(window: tuple[float, float]) -> tuple[float, float]:
    return round((NOW - window[0]) / DAY, 2), round((NOW - window[1]) / DAY, 2)


@pytest.mark.parametrize(
    ("query", "start_days_ago", "end_days_ago"),
    [
        ("What kitchen appliance did I buy 10 days ago?", 11.5, 8.5),
        ("I mentioned visiting a museum two months ago.", 76.1, 45.66),
        ("the investment I made four weeks ago", 32.2, 23.8),
        ("what did I say a week ago", 10.5, 3.5),
        ("what did I eat yesterday?", 1.65, 0.65),
    ],
)
def test_relative_offsets_and_yesterday(query: str, start_days_ago: float, end_days_ago: float) -> None:
    window = time_window(query, NOW)
    assert window is not None
    assert days_before((window.start, window.end)) == (start_days_ago, end_days_ago)
    assert window.phrase.lower() in query.lower()


def test_last_weekday_and_weekend_are_whole_calendar_days() -> None:
    friday = time_window("Who did I meet last Friday?", NOW)
    assert friday is not None
    assert (friday.start, friday.end) == (MIDNIGHT - 6 * DAY, MIDNIGHT - 5 * DAY)  # Friday 27 November
    thursday = time_window("what did I cook last thursday", NOW)  # today is Thursday: a week back
    assert thursday is not None
    assert thursday.start == MIDNIGHT - 7 * DAY
    weekend = time_window("What game did I finally beat last weekend?", NOW)
    assert weekend is not None
    assert (weekend.start, weekend.end) == (MIDNIGHT - 5 * DAY, MIDNIGHT - 3 * DAY)  # Saturday and Sunday
    week = time_window("How many hours of yoga did I do last week?", NOW)
    assert week is not None
    assert (week.start, week.end) == (MIDNIGHT - 14 * DAY, MIDNIGHT)


@pytest.mark.parametrize(
    "query",
    [
        "How many days ago did I attend a networking event?",  # asks for a duration
        "I've got some free time tonight, any documentary recommendations?",
        "what should I cook today",
        "where is the staging database",
        "the 10 days of the festival",
    ],
)
def test_queries_that_name_no_time_get_no_window(query: str) -> None:
    assert time_window(query, NOW) is None


def test_closeness_is_one_inside_and_fades_outside_over_a_window_width() -> None:
    window = time_window("10 days ago", NOW)
    assert window is not None
    width = window.end - window.start
    assert window.closeness(NOW - 10 * DAY) == 1.0
    assert window.closeness(window.start - width / 2) == pytest.approx(0.5)
    assert window.closeness(window.end + width / 2) == pytest.approx(0.5)
    assert window.closeness(window.start - 2 * width) == 0.0


async def test_recall_prefers_memories_made_in_the_time_the_query_names(tmp_path: Path) -> None:
    scope = MemoryScope(user="ana", project="p1", session="s1")
    clock = [NOW - 10 * DAY]

    async def recall(time_weight: float) -> list[tuple[str, str]]:
        settings = MemorySettings.model_validate({
            "store": "memory", "embedder": "fake", "query_adapter": "none", "time_weight": time_weight,
            "recency_weight": 0.0, "relevance_weight": 0.0, "project": {"k": 10, "threshold": -1},
        })  # fmt: skip
        clock[0] = NOW - 10 * DAY
        async with MemoryService.open(settings, tmp_path, HashEmbedder(), lambda: clock[0]) as svc:
            await svc.remember(scope, ["I bought a new blender for smoothies"])
            clock[0] = NOW - 2 * DAY
            await svc.remember(scope, ["I bought a new toaster for breakfast"])
            clock[0] = NOW
            hits = await svc.recall(scope, "what did I buy 10 days ago", tiers=("project",))
            return [(h.entry.content, h.why) for h in hits]

    timed = await recall(0.2)
    assert timed[0][0] == "I bought a new blender for smoothies"
    assert "made in the time the query names 1.00" in timed[0][1]
    assert "made in the time the query names 0.00" in timed[1][1]
    off = await recall(0.0)
    assert all("made in the time" not in why for _, why in off)
    assert off[0][0] == "I bought a new toaster for breakfast"  # without the bonus the other one ranks first
