"""The scope's in-process copy of its vectors, which recall's feedback reads: quantisation accuracy, row reuse and
growth, and staying in step with the store through writes, deletes, a reopen from ChromaDB and a log replay."""

from pathlib import Path

import numpy as np
import pytest

from hanzo_hub.config import MemorySettings
from hanzo_hub.memory.models import MemoryEntry, MemoryScope
from hanzo_hub.memory.store import MemoryStore
from hanzo_hub.memory.vector_cache import QuantizedVectors

SCOPE = MemoryScope(user="ana", project="p1", session="s1")


def unit_rows(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_quantised_vectors_keep_cosines_within_two_thousandths() -> None:
    rows = unit_rows(200)
    cache = QuantizedVectors()
    for i, row in enumerate(rows):
        cache.put(f"m{i}", row.tolist())
    got = cache.get(f"m{i}" for i in range(200))
    restored = np.stack([got[f"m{i}"] for i in range(200)])
    query = unit_rows(1, seed=1)[0]
    error = np.abs(restored @ query - rows @ query)
    assert error.max() < 2e-3
    assert error.mean() < 5e-4
    assert len(cache) == 200
    assert cache.nbytes < 200 * 400 * 2  # int8 rows and one scale each, with room to grow


def test_capacity_grows_by_a_quarter_when_written_one_at_a_time() -> None:
    dim = 16
    row_bytes = dim + 4  # int8 codes and a float32 scale
    cache = QuantizedVectors()
    for i, row in enumerate(unit_rows(5000, dim=dim)):
        cache.put(f"m{i}", row.tolist())
        capacity = cache.nbytes // row_bytes
        assert len(cache) <= capacity <= max(64, int(len(cache) * 1.25) + 1)
    cache.put_many([f"n{i}" for i in range(3000)], unit_rows(3000, dim=dim, seed=2).tolist())  # one big batch
    assert cache.nbytes // row_bytes >= 8000


def test_rows_are_reused_replaced_and_forgotten() -> None:
    a, b, c = unit_rows(3, dim=8)
    cache = QuantizedVectors()
    cache.put("a", a.tolist())
    cache.put("b", b.tolist())
    cache.remove("a")
    cache.remove("nope")
    cache.put("c", c.tolist())  # takes a's row
    cache.put("b", a.tolist())  # replaced in place
    got = cache.get(["a", "b", "c"])
    assert sorted(got) == ["b", "c"]
    assert got["b"] == pytest.approx(a, abs=0.01)
    assert got["c"] == pytest.approx(c, abs=0.01)
    assert "a" not in cache
    assert cache.get([]) == {}


def test_a_vector_of_another_dimension_reads_as_missing() -> None:
    cache = QuantizedVectors()
    cache.put("a", unit_rows(1, dim=8)[0].tolist())
    cache.put("b", unit_rows(1, dim=4)[0].tolist())
    cache.put("a", [0.5, 0.5, 0.5, 0.5])  # an old id re-embedded by another model: dropped, not mixed in
    assert cache.get(["a", "b"]) == {}


async def test_the_scope_keeps_its_copy_in_step_with_the_store(tmp_path: Path) -> None:
    """Written, deleted, reopened from ChromaDB, and replayed from the write-ahead log after a crash between the log
    and the store: the copy holds exactly the live entries, with their vectors."""
    rows = unit_rows(6, seed=3)
    key = SCOPE.key("project")
    entries = [
        MemoryEntry(id=f"m{i}", content=f"memory number {i}", user=key.user, project=key.project, tier="project",
                    created_at=1.7e9, accessed_at=1.7e9, embedding=tuple(rows[i].tolist()))
        for i in range(6)
    ]  # fmt: skip
    settings = MemorySettings(store="chroma")
    async with MemoryStore.open(settings, tmp_path) as store:
        index = await store.scope(key)
        await index.put(entries[:4])
        await index.delete(["m1"])
        assert sorted(index.quantized.get(index.entries)) == ["m0", "m2", "m3"]
        # logged but never applied to the vector store: what a kill between the log's fsync and the upsert leaves
        assert index._wal is not None
        index._wal.append([{"op": "put", "entry": entries[5].to_dict(with_embedding=True)}])
    async with MemoryStore.open(settings, tmp_path) as store:
        index = await store.scope(key)
        assert sorted(index.entries) == ["m0", "m2", "m3", "m5"]
        got = index.quantized.get(["m0", "m1", "m2", "m3", "m5"])
        assert sorted(got) == ["m0", "m2", "m3", "m5"]
        for rid, vector in got.items():
            assert float(vector @ rows[int(rid[1:])]) == pytest.approx(1.0, abs=2e-3)
