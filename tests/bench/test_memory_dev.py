"""The memory development set places each question's evidence anywhere in its haystack, as LongMemEval_S does.

Built from synthetic questions shaped like ``longmemeval_oracle.json.gz`` (evidence sessions a few days before the
question), so it needs none of the benchmark's data.
"""

import statistics
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

# bench/ is on the path only while its modules import: it also holds a ``datasets.py`` that must not shadow
# Hugging Face's package for the rest of the session
_BENCH = str(Path(__file__).resolve().parents[2] / "bench")
sys.path.insert(0, _BENCH)
try:
    from _memory_dev import SESSIONS, _date, dev_items
    from _memory_retrieval import parse_date
finally:
    sys.path.remove(_BENCH)

ASKED = datetime(2023, 5, 20, 12, 0)


def _question(n: int) -> dict[str, Any]:
    """Two evidence sessions, 1-6 days before the question, each with one marked user turn."""
    sessions, dates, ids = [], [], []
    for k in range(2):
        dates.append(_date((ASKED - timedelta(days=1 + (n + 3 * k) % 6, hours=k)).timestamp()))
        ids.append(f"answer_{n}_{k}")
        sessions.append([
            {"role": "user", "content": f"fact {n}.{k}", "has_answer": True},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": f"chat {n}.{k}", "has_answer": False},
        ])  # fmt: skip
    return {"question_id": f"q{n}", "question_date": _date(ASKED.timestamp()), "haystack_dates": dates,
            "haystack_session_ids": ids, "haystack_sessions": sessions}  # fmt: skip


def _built() -> list[dict[str, Any]]:
    return dev_items([_question(n) for n in range(60)])


def test_evidence_lies_anywhere_in_the_haystack_not_only_in_its_newest_sessions() -> None:
    back = []  # how far back each question's evidence sits, as a share of its haystack's sessions
    for item in _built():
        sessions = item["haystack_session_ids"]
        assert len(sessions) == SESSIONS
        own = [i for i, sid in enumerate(sessions) if sid.startswith(f"answer_{item['question_id'][1:]}_")]
        assert len(own) == 2
        back.append(statistics.fmean(1 - (i + 1) / len(sessions) for i in own))
    # Evidence dated only by its real date, behind 120 days of distractors, put this near 0 for every question.
    assert 0.25 < statistics.median(back) < 0.75
    assert sum(b > 0.5 for b in back) >= 15
    assert sum(b < 0.2 for b in back) >= 6


def test_haystacks_are_in_date_order_before_the_question_and_distractors_lose_their_marks() -> None:
    first, second = _built(), _built()
    assert first == second  # seeded by question id
    for item in first:
        dates = [parse_date(d) for d in item["haystack_dates"]]
        assert dates == sorted(dates)
        assert max(dates) < parse_date(item["question_date"])
        for sid, session in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True):
            if sid.startswith("x"):  # drawn from another question
                assert not any(turn.get("has_answer") for turn in session)
