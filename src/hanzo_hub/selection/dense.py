"""Dense retrieval: tool vectors in a numpy matrix, filled incrementally from a ``VectorStore``.

The store (ChromaDB in production) is the persistent copy keyed by content hash; searching uses an in-memory
matrix because an exact dot product over 10K x 384 floats takes about a millisecond, cheaper than an ANN round trip,
and lets several sub-queries be scored in one matrix product.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hanzo_hub.selection.text import content_hash
from hanzo_hub.vectors.base import Embedder, VectorRecord, VectorStore

logger = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class SyncStats:
    """What an index sync did: how many tools were embedded, reused from the store, deleted, and taken from the
    shipped precomputed vectors (``seeded``, not counted as embedded)."""

    embedded: int
    reused: int
    deleted: int
    seeded: int = 0


class DenseIndex:
    """Unit vectors of a fixed, ordered list of ids."""

    def __init__(self, ids: Sequence[str], matrix: Matrix) -> None:
        if len(ids) != matrix.shape[0]:
            raise ValueError("one vector per id")
        self.ids = list(ids)
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, queries: Matrix) -> Matrix:
        """Cosine similarity of each query row with every tool: shape ``(len(queries), len(self))``."""
        return np.asarray(queries, dtype=np.float32) @ self.matrix.T

    @classmethod
    def from_vectors(
        cls, ids: Sequence[str], vectors: Sequence[Sequence[float]] | Matrix, dimension: int
    ) -> DenseIndex:
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(ids), dimension)
        return cls(ids, matrix)


async def sync_index(
    ids: Sequence[str],
    texts: Sequence[str],
    embedder: Embedder,
    store: VectorStore,
    *,
    metadata: Sequence[dict[str, str]] | None = None,
    seeds: Mapping[str, Sequence[float] | npt.NDArray[np.float32]] | None = None,
) -> tuple[DenseIndex, SyncStats]:
    """Bring ``store`` in line with the given tools, embedding only new or changed texts, and build the index.

    A tool is re-embedded when the hash of its text and the embedder's model id differs from the stored one; tools
    no longer present are deleted from the store. A stale tool whose wanted hash is in ``seeds`` (precomputed
    vectors of the same model, keyed by the same hash) takes that vector instead of being embedded.

    Raises:
        EmbeddingError: the embedder failed.
        VectorStoreError: the store failed.
    """
    wanted = {rid: content_hash(text, embedder.model_id) for rid, text in zip(ids, texts, strict=True)}
    stored = await store.hashes()
    stale = [i for i, rid in enumerate(ids) if stored.get(rid) != wanted[rid]]
    removed = [rid for rid in stored if rid not in wanted]
    seeds = seeds or {}
    seeded = [i for i in stale if wanted[ids[i]] in seeds]
    to_embed = [i for i in stale if wanted[ids[i]] not in seeds]
    metas = metadata or [{} for _ in ids]
    records = [
        VectorRecord(ids[i], wanted[ids[i]], [float(x) for x in seeds[wanted[ids[i]]]], metas[i]) for i in seeded
    ]
    if to_embed:
        vectors = await embedder.embed([texts[i] for i in to_embed])
        records += [
            VectorRecord(ids[i], wanted[ids[i]], vec, metas[i]) for i, vec in zip(to_embed, vectors, strict=True)
        ]
    await store.upsert(records)
    await store.delete(removed)
    by_id = {rec.id: rec.vector for rec in await store.get_all()}
    index = DenseIndex.from_vectors(ids, [by_id[rid] for rid in ids], embedder.dimension)
    stats = SyncStats(embedded=len(to_embed), reused=len(ids) - len(stale), deleted=len(removed), seeded=len(seeded))
    logger.info(
        "tool index synced: %d embedded, %d seeded from shipped vectors, %d reused, %d deleted",
        stats.embedded,
        stats.seeded,
        stats.reused,
        stats.deleted,
    )
    return index, stats
