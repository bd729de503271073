"""Embedded, persistent ChromaDB adapter: the only module that imports chromadb.

Collections are created with ``embedding_function=None`` (chromadb's default embedder would download an ONNX model)
and cosine space; vectors always come from our ``Embedder``. Each record keeps its content hash in metadata under
``_hash`` so an index can re-embed only what changed. Every chromadb call runs in a worker thread behind a limiter
owned by the store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from hanzo_hub.errors import VectorStoreError
from hanzo_hub.vectors.base import VectorRecord

HASH_KEY = "_hash"
SEARCH_EF = 400
"""HNSW ``ef_search`` of new collections (the tool index): measured here to remove nearly all ANN misses at these
catalog sizes. Chroma fixes it when a collection is created; an existing collection keeps its own."""

_T = TypeVar("_T")


@contextlib.contextmanager
def map_chroma_errors(what: str) -> Iterator[None]:
    """Translate chromadb failures into ``VectorStoreError``."""
    try:
        yield
    except VectorStoreError:
        raise
    except Exception as exc:  # foreign library boundary
        said = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        reason = f"{type(exc).__name__}: {said}" if said else type(exc).__name__
        raise VectorStoreError(f"chroma {what} failed: {reason}") from exc


def _forget_failed_system(path: str) -> None:
    """Drop the system chromadb cached for ``path`` when it failed to start (a full disk): chromadb registers it
    before starting it, so every later client of that folder would get the broken one (``AttributeError``) even once
    the disk has room. Only a system no client holds is dropped."""
    from chromadb.api.shared_system_client import SharedSystemClient

    systems, refcounts = SharedSystemClient._identifier_to_system, SharedSystemClient._identifier_to_refcount
    with SharedSystemClient._refcount_lock:
        for identifier, system in list(systems.items()):
            if system.settings.persist_directory == path and not refcounts.get(identifier):
                del systems[identifier]


class ChromaVectorStore:
    """A ``VectorStore`` on one collection of an embedded persistent ChromaDB (or a Chroma server)."""

    def __init__(
        self,
        path: str | Path | None,
        collection: str = "tools",
        *,
        host: str | None = None,
        port: int = 8000,
        search_ef: int = SEARCH_EF,
    ) -> None:
        self._path = Path(path) if path is not None else None
        self._search_ef = search_ef
        self._collection_name = collection
        self._host = host
        self._port = port
        self._client: Any = None
        self._collection: Any = None
        self._limiter = anyio.CapacityLimiter(1)

    def _open(self) -> Any:
        if self._collection is not None:
            return self._collection
        with map_chroma_errors("open"):
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False, allow_reset=False)
            if self._host is not None:
                self._client = chromadb.HttpClient(host=self._host, port=self._port, settings=settings)
            elif self._path is not None:
                self._path.mkdir(parents=True, exist_ok=True)
                try:
                    self._client = chromadb.PersistentClient(path=str(self._path), settings=settings)
                except Exception:
                    _forget_failed_system(str(self._path))
                    raise
            else:
                self._client = chromadb.EphemeralClient(settings=settings)
            self._collection = self._client.get_or_create_collection(
                self._collection_name,
                embedding_function=None,
                metadata={"hnsw:space": "cosine", "hnsw:search_ef": self._search_ef},
            )
        return self._collection

    async def _run(self, what: str, fn: Callable[[Any], _T]) -> _T:
        def call() -> _T:
            collection = self._open()
            with map_chroma_errors(what):
                return fn(collection)

        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def hashes(self) -> dict[str, str]:
        def get(collection: Any) -> dict[str, str]:
            result = collection.get(include=["metadatas"])
            return {
                rid: str((meta or {}).get(HASH_KEY, ""))
                for rid, meta in zip(result["ids"], result["metadatas"], strict=True)
            }

        return await self._run("get", get)

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        if not records:
            return
        ids = [r.id for r in records]
        vectors = [list(r.vector) for r in records]
        metas: list[dict[str, str]] = [{**r.metadata, HASH_KEY: r.content_hash} for r in records]
        await self._run("upsert", lambda c: c.upsert(ids=ids, embeddings=vectors, metadatas=metas))

    async def delete(self, ids: Sequence[str]) -> None:
        if ids:
            await self._run("delete", lambda c: c.delete(ids=list(ids)))

    async def get_all(self) -> list[VectorRecord]:
        def get(collection: Any) -> list[VectorRecord]:
            result = collection.get(include=["metadatas", "embeddings"])
            records = []
            for rid, meta, vec in zip(result["ids"], result["metadatas"], result["embeddings"], strict=True):
                meta = dict(meta or {})
                content_hash = str(meta.pop(HASH_KEY, ""))
                records.append(
                    VectorRecord(rid, content_hash, [float(x) for x in vec], {k: str(v) for k, v in meta.items()})
                )
            return records

        return await self._run("get", get)

    async def query(self, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        if k <= 0:
            return []

        def search(collection: Any) -> list[tuple[str, float]]:
            # no count() first: it cost as much as the HNSW search at 100,000 vectors, and Chroma answers a k larger
            # than the collection (or an empty one) with what it has
            result = collection.query(query_embeddings=[list(vector)], n_results=k, include=["distances"])
            return [(rid, 1.0 - float(d)) for rid, d in zip(result["ids"][0], result["distances"][0], strict=True)]

        return await self._run("query", search)

    async def aclose(self) -> None:
        self._collection = None
        self._client = None
