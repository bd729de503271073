"""A development set for memory recall that never reads the benchmark's questions: haystacks built from the
LongMemEval questions outside ``longmemeval_s_cleaned_subset200``.

``longmemeval_oracle.json.gz`` gives each of the 500 questions only its evidence sessions. For every training
question (outside the subset, abstentions excluded) this builds a haystack the way LongMemEval_S is built: its own
evidence sessions at their real dates, plus ``SESSIONS`` minus that many sessions drawn (seeded by question id)
from the other training questions' evidence sessions, their ``has_answer`` marks removed, dated uniformly between
120 days before the first evidence session and the question, all in date order. The distractors are other users'
personal conversations (LongMemEval_S mixes those with ShareGPT / UltraChat chats), so the set is a little harder
on topic and a little smaller (about 280 user turns against about 500).

``train_memory_adapter.py`` picks the adapter's regularisation and every fusion weight on it, by two-fold
cross-fitting (the adapter scoring a fold never saw that fold's questions), so ``memory.py`` can report all of the
subset as held out.
"""

from __future__ import annotations

import gzip
import json
import random
from datetime import datetime
from typing import Any

import numpy as np

from _memory_embed import DATA, load, text_key
from _memory_retrieval import Haystack, parse_date

ORACLE = DATA.parent / "longmemeval_oracle.json.gz"
SESSIONS = 48
"""Sessions per haystack (LongMemEval_S has about 48)."""
SPAN_BEFORE = 120 * 86400
"""Distractors are dated from this long before the first evidence session up to the question."""


def training_items() -> list[dict[str, Any]]:
    """Oracle questions outside the benchmark's subset, abstentions excluded."""
    scored = {item["question_id"] for item in load()}
    items: list[dict[str, Any]] = json.loads(gzip.decompress(ORACLE.read_bytes()))
    return [i for i in items if i["question_id"] not in scored and not i["question_id"].endswith("_abs")]


def _date(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y/%m/%d (%a) %H:%M")


def _unmarked(session: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in turn.items() if k != "has_answer"} for turn in session]


def dev_items(items: list[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """Each of ``items`` with a haystack of its evidence sessions among the others' (see the module docstring)."""
    pool = [
        (owner, sid, session)
        for owner, item in enumerate(items)
        for sid, session in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True)
    ]
    out = []
    for n, item in enumerate(items):
        rng = random.Random(f"{seed}-{item['question_id']}")
        asked = parse_date(item["question_date"])
        own = list(
            zip(
                (parse_date(d) for d in item["haystack_dates"]),
                item["haystack_session_ids"],
                item["haystack_sessions"],
                strict=True,
            )
        )
        start = min(t for t, _, _ in own) - SPAN_BEFORE
        ids = {sid for _, sid, _ in own}
        others = [p for p in pool if p[0] != n and p[1] not in ids]
        drawn = rng.sample(others, max(0, SESSIONS - len(own)))
        sessions = own + [(rng.uniform(start, asked - 3600), f"x{o}-{sid}", _unmarked(s)) for o, sid, s in drawn]
        sessions.sort(key=lambda s: s[0])
        out.append(
            item
            | {
                "haystack_dates": [_date(t) for t, _, _ in sessions],
                "haystack_session_ids": [sid for _, sid, _ in sessions],
                "haystack_sessions": [s for _, _, s in sessions],
            }
        )
    return out


def dev_haystacks(items: list[dict[str, Any]], vector: dict[str, np.ndarray]) -> list[Haystack]:
    """``dev_items`` as haystacks, with vectors from ``vector`` (``text_key`` → vector)."""
    return [Haystack.of(item, lambda text: vector[text_key(text)]) for item in dev_items(items)]
