"""Recall's pseudo-relevance feedback: the query moves towards its best hits, so that a memory close to the best
hit but far from the query's words outranks one that only matches the query a little better."""

import math

import pytest

from hanzo_hub.config import MemorySettings
from hanzo_hub.memory.feedback import expanded_query
from hanzo_hub.memory.models import MemoryEntry, ScopeKey
from hanzo_hub.memory.store import NumpyVectorStore, ScopeIndex
from hanzo_hub.memory.tiers import TieredRetriever

NOW = 1_700_000_000.0


def unit(*xs: float) -> tuple[float, ...]:
    norm = math.sqrt(sum(x * x for x in xs))
    return tuple(x / norm for x in xs)


# the query is axis 0. 'trip' answers it best; 'second trip' is about the same thing (close to 'trip') but shares
# little with the query; 'recipe' shares a little more with the query than 'second trip' and nothing with 'trip'
QUERY = (1.0, 0.0, 0.0)
VECTORS = {
    "trip": unit(0.9, 0.44, 0.0),
    "second trip": unit(0.3, 0.95, 0.0),
    "recipe": unit(0.4, 0.0, 0.92),
}


async def recall(**settings: float) -> list[tuple[str, str]]:
    index = ScopeIndex(ScopeKey("ana", "p1", "project"), NumpyVectorStore(), None, None)
    await index.put(
        [
            MemoryEntry(
                id=name,
                content=name,
                user="ana",
                project="p1",
                tier="project",
                created_at=NOW,
                accessed_at=NOW,
                source="s1",
                embedding=vector,
            )
            for name, vector in VECTORS.items()
        ]
    )
    tier = {"k": 10, "threshold": 0.0}
    config = MemorySettings(store="memory", lexical=False, recency_weight=0.0, relevance_weight=0.0, project=tier,
                            time_weight=0.0, **settings)  # fmt: skip
    hits = await TieredRetriever(config, lambda: NOW).recall({"project": index}, "where did I travel", QUERY)
    return [(h.entry.id, h.why) for h in hits]


async def test_feedback_lifts_what_resembles_the_best_hit() -> None:
    off = await recall(feedback_weight=0.0)
    on = await recall(feedback_weight=0.7, feedback_top=1)
    assert [name for name, _ in off] == ["trip", "recipe", "second trip"]
    assert [name for name, _ in on] == ["trip", "second trip", "recipe"]
    assert all("moved towards the best hits" in why for _, why in on)
    assert not any("moved towards" in why for _, why in off)
    # the semantic part is the expanded query's cosine: 'second trip' 0.301 -> 0.473
    second = dict(on)["second trip"]
    assert "cosine 0.301," in second
    assert "cosine 0.47" in second


async def test_feedback_is_on_by_default_and_keeps_every_hit() -> None:
    assert MemorySettings().feedback_weight > 0
    default = await recall()
    assert sorted(name for name, _ in default) == sorted(VECTORS)


def test_the_expanded_query_is_a_unit_vector_between_the_query_and_the_best_hits() -> None:
    moved = expanded_query(QUERY, [VECTORS["trip"], VECTORS["second trip"]], 0.7)
    assert float((moved**2).sum()) == pytest.approx(1.0)
    assert moved[0] < 1.0
    assert moved[1] > 0.0
    assert moved[2] == pytest.approx(0.0)
    assert list(expanded_query(QUERY, [VECTORS["trip"]], 0.0)) == pytest.approx(list(QUERY))
