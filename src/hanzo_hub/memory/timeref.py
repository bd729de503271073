"""Time references in a recall query ("ten days ago", "last Saturday", "yesterday") as a window of time.

Memories carry when they were made (``created_at``); a question that names when something happened can prefer the
memories made then. Only references that pin a time are read: relative offsets ("two months ago", "3 weeks ago"),
``yesterday``, ``last week/month/year/weekend`` and ``last <weekday>``. A question that asks for a duration ("how
many days ago did I...") names no window and gets none, and neither do "today" or "tonight", which in a request
more often mean what is to come ("any plans for tonight?") than what was said. Everything is computed in UTC from the
service clock, so a test or a benchmark with an injected clock gets the same answer as production.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["TimeWindow", "time_window"]

DAY = 86400.0
_UNITS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "few": 3,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_AGO = re.compile(
    r"\b(\d{1,3}|" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\s+(day|week|month|year)s?\s+ago\b",
    re.IGNORECASE,
)
_LAST = re.compile(r"\b(?:last|past|previous)\s+(week|month|year|weekend|" + "|".join(_WEEKDAYS) + r")\b", re.I)
_DAYWORD = re.compile(r"\byesterday\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``start``..``end`` (epoch seconds) and what in the query named it."""

    start: float
    end: float
    phrase: str

    def closeness(self, when: float) -> float:
        """1 inside the window, falling off outside it over one window width (at least a day)."""
        if self.start <= when <= self.end:
            return 1.0
        width = max(self.end - self.start, DAY)
        gap = self.start - when if when < self.start else when - self.end
        return max(0.0, 1.0 - gap / width)


def time_window(query: str, now: float) -> TimeWindow | None:
    """The window of time ``query`` refers to, relative to ``now``; None when it names none."""
    m = _AGO.search(query)
    if m:
        count = m.group(1).lower()
        n = float(count) if count.isdigit() else float(_WORDS[count])
        unit = _UNITS[m.group(2).lower()]
        centre = now - n * unit * DAY
        half = max(1.0, 0.5 * unit, 0.15 * n * unit) * DAY
        return TimeWindow(centre - half, min(now, centre + half), m.group(0))
    m = _LAST.search(query)
    if m:
        return _last(m.group(1).lower(), now, m.group(0))
    m = _DAYWORD.search(query)
    if m:
        today = _midnight(now)
        return TimeWindow(today - DAY, today, m.group(0))
    return None


def _midnight(now: float) -> float:
    d = datetime.fromtimestamp(now, UTC)
    return datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()


def _last(what: str, now: float, phrase: str) -> TimeWindow:
    today = _midnight(now)
    weekday = datetime.fromtimestamp(now, UTC).weekday()
    if what in _WEEKDAYS:
        back = (weekday - _WEEKDAYS.index(what)) % 7 or 7
        start = today - back * DAY
        return TimeWindow(start, start + DAY, phrase)
    if what == "weekend":
        back = (weekday - 5) % 7 or 7  # the last Saturday before today
        start = today - back * DAY
        return TimeWindow(start, start + 2 * DAY, phrase)
    span = {"week": 7.0, "month": 30.44, "year": 365.25}[what]
    return TimeWindow(today - 2 * span * DAY, today, phrase)
