"""A development set for memory recall that never reads the benchmark's questions: haystacks built from the
LongMemEval questions outside ``longmemeval_s_cleaned_subset200``.

``longmemeval_oracle.json.gz`` gives each of the 500 questions only its evidence sessions. For every training
question (outside the subset, abstentions excluded) this builds a haystack the way LongMemEval_S is built: its own
evidence sessions at their real dates, plus ``SESSIONS`` minus that many sessions drawn (seeded by question id)
from the other training questions' evidence sessions, their ``has_answer`` marks removed, dated uniformly between
a start and the question, all in date order. The start is drawn so that the evidence sessions' mean date lies a
uniform fraction (5% to 100%) of the span back from the question, as evidence lies anywhere in LongMemEval_S's
haystacks. Until 2026-12-08 the distractors (the same sessions) were dated from 120 days before the first evidence
session, which put the gold turns in the newest 6% of a haystack at the median (the benchmark: 48%): position and
age told gold from distractors there, as they do not in the benchmark. The distractors are other users' personal
conversations (LongMemEval_S mixes those with ShareGPT / UltraChat chats), so the set is a little harder
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
EVIDENCE_BACK = (0.05, 1.0)
"""How far back, as a fraction of the distractors' span, the evidence sessions' mean date lies: drawn uniformly from
this range per question, so the evidence sits anywhere in the haystack as in LongMemEval_S. Gold turns then lie a
median 44% of the haystack back from the question (the benchmark: 48%)."""


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
        ids = {sid for _, sid, _ in own}
        others = [p for p in pool if p[0] != n and p[1] not in ids]
        drawn = rng.sample(others, max(0, SESSIONS - len(own)))
        middle = sum(t for t, _, _ in own) / len(own)
        # Distractors fill [start, asked): the evidence's mean date lands a uniform fraction of the way back.
        start = asked - max(asked - middle, 3600.0) / rng.uniform(*EVIDENCE_BACK)
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
