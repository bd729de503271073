"""Protocols for embedders and vector stores.

Vectors are plain ``list[float]`` at the protocol boundary so that callers need no numpy; implementations are free
to use arrays inside. Embedders return unit-normalised vectors, so a dot product is the cosine similarity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of a fixed dimension."""

    @property
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    @property
    def model_id(self) -> str:
        """Stable identifier of the model; part of the content hash, so changing the model re-embeds."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in a worker thread; never blocks the event loop.

        Raises:
            EmbeddingError: the model failed.
        """
        ...

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` on the calling thread (for worker threads and benchmarks)."""
        ...


@runtime_checkable
class QueryEmbedder(Protocol):
    """An embedder with a faster path for search queries (vectors comparable with ``embed``'s, not identical)."""

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries in a worker thread.

        Raises:
            EmbeddingError: the model failed.
        """
        ...


async def embed_queries(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """Embed search queries with ``embedder``'s query path where it has one, else with ``embed``."""
    if isinstance(embedder, QueryEmbedder):
        return await embedder.embed_queries(texts)
    return await embedder.embed(texts)


@dataclass(frozen=True, slots=True)
class VectorRecord:
    """One stored item: its id, the hash of the text it was embedded from, the vector and metadata."""

    id: str
    content_hash: str
    vector: list[float]
    metadata: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class VectorStore(Protocol):
    """A persistent collection of vectors keyed by id, each tagged with a content hash."""

    async def hashes(self) -> dict[str, str]:
        """Return ``{id: content_hash}`` for every stored record."""
        ...

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by id."""
        ...

    async def delete(self, ids: Sequence[str]) -> None:
        """Remove records by id; unknown ids are ignored."""
        ...

    async def get_all(self) -> list[VectorRecord]:
        """Return every record with its vector."""
        ...

    async def query(self, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """Return up to ``k`` ``(id, cosine similarity)`` pairs, best first."""
        ...

    async def aclose(self) -> None:
        """Release the store."""
        ...
