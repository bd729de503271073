from pathlib import Path

import pytest

from hanzo_hub.selection.dense import sync_index
from hanzo_hub.vectors import EMBEDDERS, VECTOR_STORES, load_impl
from hanzo_hub.vectors.fake import HashEmbedder, MemoryVectorStore


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.embedded: list[str] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
        self.embedded.extend(texts)
        return self.embed_sync(texts)


def test_hash_embedder_is_deterministic_and_unit_length() -> None:
    a, b = HashEmbedder().embed_sync(["read a file", "read a file"])
    assert a == b
    assert abs(sum(x * x for x in a) - 1.0) < 1e-9


def test_dispatch_tables_resolve_implementations() -> None:
    assert load_impl(EMBEDDERS, "fake") is HashEmbedder
    assert load_impl(VECTOR_STORES, "memory") is MemoryVectorStore


async def test_sync_reembeds_only_changed_tools_in_memory() -> None:
    store, embedder = MemoryVectorStore(), CountingEmbedder()
    _, first = await sync_index(["a", "b"], ["alpha", "beta"], embedder, store)
    _, second = await sync_index(["a", "c"], ["alpha", "gamma"], embedder, store)
    assert (first.embedded, second.embedded, second.reused, second.deleted) == (2, 1, 1, 1)
    assert embedder.embedded == ["alpha", "beta", "gamma"]


async def test_chroma_store_persists_and_reembeds_by_content_hash(tmp_path: Path) -> None:
    pytest.importorskip("chromadb")
    from hanzo_hub.vectors.chroma_store import ChromaVectorStore

    embedder = CountingEmbedder()
    store = ChromaVectorStore(tmp_path / "db")
    index, stats = await sync_index(["t1", "t2"], ["read file", "write file"], embedder, store)
    assert stats.embedded == 2
    hits = await store.query(embedder.embed_sync(["read file"])[0], 1)
    assert hits[0][0] == "t1"
    assert hits[0][1] == pytest.approx(1.0, abs=1e-4)
    await store.aclose()

    reopened = ChromaVectorStore(tmp_path / "db")
    index2, stats2 = await sync_index(["t1", "t2"], ["read file", "write a file"], embedder, reopened)
    assert (stats2.embedded, stats2.reused) == (1, 1)
    assert embedder.embedded[-1] == "write a file"
    assert index2.matrix.shape == index.matrix.shape
    await reopened.aclose()
