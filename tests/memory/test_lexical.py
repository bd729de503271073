"""The memory BM25 index: the same scores as tool selection's BM25 through adds, replacements and removals."""

from __future__ import annotations

import pytest

from hanzo_hub.memory.lexical import IncrementalBM25
from hanzo_hub.selection.lexical import BM25Index

WORDS = [
    *("deploy", "key", "vault", "backup", "restore", "paris", "weather"),
    *("train", "ticket", "doctor", "appointment", "march", "guitar", "lesson"),
]


def _text(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 5))


def test_scores_match_a_fresh_index_after_changes() -> None:
    index = IncrementalBM25()
    for i in range(60):
        index.add(str(i), _text(i), group=f"g{i % 7}")
    for i in range(0, 60, 4):
        index.remove(str(i))
    for i in range(1, 60, 9):
        index.add(str(i), _text(i + 100))  # replaced, and moved out of its group
    replaced = set(range(1, 60, 9))
    live = {str(i): (_text(i + 100) if i in replaced else _text(i)) for i in range(60) if i % 4 or i in replaced}
    reference = BM25Index(list(live.values()))
    ids = list(live)
    for query in ("deploy key", "doctor appointment in march", "weather paris train", "nothing matches"):
        expected = {ids[j]: score for j, score in reference.scores(query).items()}
        got = index.scores(query)
        assert got.keys() == expected.keys()
        for doc_id, score in expected.items():
            assert got[doc_id] == pytest.approx(score, rel=1e-9)
        top = index.search(query, 3)
        assert [score for _, score in top] == pytest.approx(sorted(expected.values(), reverse=True)[:3])


def test_a_conversation_matching_as_a_whole_outranks_one_matching_in_part() -> None:
    index = IncrementalBM25()
    index.add("a1", "I booked the train", group="trip")
    index.add("a2", "the ticket was expensive", group="trip")
    index.add("b1", "my guitar lesson ticket", group="music")
    index.add("c1", "weather in paris", group="other")
    ranked = index.search_groups("train ticket", 5)
    assert [g for g, _ in ranked] == ["trip", "music"]
    index.remove("a1")
    assert dict(index.search_groups("train ticket", 5)).keys() == {"trip", "music"}
    assert index.search_groups("train", 5) == []
    index.remove("a2")
    assert [g for g, _ in index.search_groups("ticket", 5)] == ["music"]
    assert len(index) == 2
