"""LongMemEval retrieval: one question's haystack as turns, the ranking methods compared, and the metrics.

Protocol (LongMemEval's retrieval evaluation): each question's haystack is its own memory store, keys are user
turns, the query is the question. Gold turns are those marked ``has_answer`` (user turns; questions whose evidence
is only in assistant turns count at session level only), gold sessions are ``answer_session_ids``. A session's
rank is the first appearance of one of its turns in the turn ranking. Abstention questions are skipped.

The ``official ...`` metrics follow the conventions of LongMemEval's own ``run_retrieval.py`` and ``eval_utils.py``
instead (turn granularity, ``turn2session`` for sessions): gold sessions are only those holding a gold user turn
(an answer session whose evidence lies in assistant turns is not gold), and every non-abstention question counts,
a question without gold user turns scoring all = 1 and any = 0 (Python's ``all([])`` and ``any([])``). The plain
metrics are the stricter reading and the ones the README leads with.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from hanzo_hub.selection.lexical import BM25Index

Vec = npt.NDArray[np.float32]
BUCKETS = [(0, 10, "first 10 turns back"), (10, 50, "10-50"), (50, 200, "50-200"), (200, 10**9, "beyond 200")]


def parse_date(text: str) -> float:
    """LongMemEval dates (``2023/03/27 (Mon) 00:49``) as epoch seconds (UTC)."""
    return datetime.strptime(text[:10] + text[-6:], "%Y/%m/%d %H:%M").timestamp()


@dataclass
class Haystack:
    """One question: its user turns in order, with session, date, distance from the end and gold labels."""

    qid: str
    qtype: str
    question: str
    question_time: float
    texts: list[str]
    sessions: list[str]
    times: list[float]
    back: list[int]
    gold_turns: set[int]
    gold_sessions: set[str]
    vecs: Vec
    qvec: Vec

    @classmethod
    def of(cls, item: dict[str, Any], vector: Callable[[str], Vec]) -> Haystack:
        texts: list[str] = []
        sessions: list[str] = []
        times: list[float] = []
        back: list[int] = []
        gold: set[int] = set()
        total = sum(len(s) for s in item["haystack_sessions"])
        pos = 0
        for sid, date, session in zip(
            item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
        ):
            start = parse_date(date)
            for turn_no, turn in enumerate(session):
                pos += 1
                if turn["role"] != "user":
                    continue
                if turn.get("has_answer"):
                    gold.add(len(texts))
                texts.append(turn["content"])
                sessions.append(sid)
                times.append(start + turn_no)
                back.append(total - pos)
        return cls(
            item["question_id"], item["question_type"], item["question"], parse_date(item["question_date"]),
            texts, sessions, times, back, gold, set(item["answer_session_ids"]),
            np.stack([vector(t) for t in texts]), vector(item["question"]),
        )  # fmt: skip


def rrf(*rankings: list[int], k: float = 60.0) -> list[int]:
    """Reciprocal rank fusion."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking):
            score[i] = score.get(i, 0.0) + 1 / (k + r + 1)
    return sorted(score, key=lambda i: -score[i])


def bm25_ranking(h: Haystack) -> list[int]:
    """BM25 over the user turns (the project's tokenizer, k1 1.2, b 0.75)."""
    scores = BM25Index(h.texts).scores(h.question)
    ranked = sorted(scores, key=lambda i: -scores[i])
    return ranked + [i for i in range(len(h.texts)) if i not in scores]


def dense_ranking(h: Haystack) -> list[int]:
    """Cosine over MiniLM turn embeddings."""
    ranking: list[int] = np.argsort(-(h.vecs @ h.qvec), kind="stable").tolist()
    return ranking


CEILING_DEPTHS = (20, 30, 50)


def ndcg(ranked: list[str], gold: set[str], k: int) -> float:
    dcg = sum(1 / math.log2(r + 2) for r, x in enumerate(ranked[:k]) if x in gold)
    ideal = sum(1 / math.log2(r + 2) for r in range(min(k, len(gold))))
    return dcg / ideal if ideal else 0.0


def score_ranking(h: Haystack, ranking: list[int], acc: dict[str, list[float]]) -> None:
    """Append this question's metrics for ``ranking`` (turn indexes, best first) to ``acc``."""
    rt = [str(i) for i in ranking]
    rs = list(dict.fromkeys(h.sessions[i] for i in ranking))
    gold_t = {str(i) for i in h.gold_turns}
    for k in (5, 10):
        if gold_t:
            acc.setdefault(f"turn_recall_any@{k}", []).append(float(bool(gold_t & set(rt[:k]))))
            acc.setdefault(f"turn_recall_all@{k}", []).append(float(gold_t <= set(rt[:k])))
        acc.setdefault(f"session_recall_any@{k}", []).append(float(bool(h.gold_sessions & set(rs[:k]))))
        acc.setdefault(f"session_recall_all@{k}", []).append(float(h.gold_sessions <= set(rs[:k])))
    official_s = {h.sessions[i] for i in h.gold_turns}
    for k in (5, 10):
        acc.setdefault(f"official turn_recall_all@{k}", []).append(float(gold_t <= set(rt[:k])))
        acc.setdefault(f"official turn_recall_any@{k}", []).append(float(bool(gold_t & set(rt[:k]))))
        acc.setdefault(f"official session_recall_all@{k}", []).append(float(official_s <= set(rs[:k])))
        acc.setdefault(f"official session_recall_any@{k}", []).append(float(bool(official_s & set(rs[:k]))))
    if gold_t:
        acc.setdefault("turn_ndcg@10", []).append(ndcg(rt, gold_t, 10))
        # what a re-ranker handed the top n (memory.rerank_top) could at best put in the top 10
        for n in CEILING_DEPTHS:
            acc.setdefault(f"turn_recall_all@{n} (re-rank ceiling)", []).append(float(gold_t <= set(rt[:n])))
    acc.setdefault("session_ndcg@10", []).append(ndcg(rs, h.gold_sessions, 10))
    top10 = set(ranking[:10])
    for lo, hi, name in BUCKETS:
        for g in h.gold_turns:
            if lo <= h.back[g] < hi:
                acc.setdefault(f"turn_recall@10 {name}", []).append(float(g in top10))


def evaluate(
    haystacks: list[Haystack], methods: Mapping[str, Callable[[Haystack], list[int]]]
) -> dict[str, dict[str, float]]:
    """Every metric of every method, averaged over ``haystacks`` (bucket counts under ``n <bucket>``)."""
    out: dict[str, dict[str, float]] = {}
    for name, method in methods.items():
        acc: dict[str, list[float]] = {}
        started = time.perf_counter()
        for h in haystacks:
            score_ranking(h, method(h), acc)
        row = {k: round(float(np.mean(v)), 4) for k, v in sorted(acc.items())}
        row |= {f"n {k}": len(v) for k, v in sorted(acc.items()) if k.startswith("turn_recall@10")}
        row["questions"] = len(haystacks)
        row["ms_per_question"] = round((time.perf_counter() - started) * 1000 / max(1, len(haystacks)), 1)
        out[name] = row
    return out
