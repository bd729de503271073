"""Deterministic stand-ins for tests: a hashing embedder and an in-memory vector store.

``HashEmbedder`` hashes word unigrams and character trigrams into a fixed number of buckets (the "hashing trick"),
so texts sharing words get similar vectors. It is fast, needs no model, and gives the same vector on every run.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from hanzo_hub.vectors.base import VectorRecord

_WORD = re.compile(r"[a-z0-9]+")


def _bucket(token: str, dimension: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dimension, 1.0 if (value >> 63) & 1 else -1.0


class HashEmbedder:
    """Bag-of-words hashing embedder: deterministic, dependency-free, unit-normalised."""

    def __init__(self, dimension: int = 256) -> None:
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def model_id(self) -> str:
        return f"hash-{self._dimension}"

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self._dimension
        words = _WORD.findall(text.lower())
        tokens = words + [w[i : i + 3] for w in words for i in range(max(1, len(w) - 2))]
        for token in tokens:
            index, sign = _bucket(token, self._dimension)
            vector[index] += sign
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_sync(texts)


class MemoryVectorStore:
    """A dict-backed ``VectorStore`` with exact cosine search (vectors are assumed unit length)."""

    def __init__(self) -> None:
        self._records: dict[str, VectorRecord] = {}

    async def hashes(self) -> dict[str, str]:
        return {rid: rec.content_hash for rid, rec in self._records.items()}

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        for record in records:
            self._records[record.id] = record

    async def delete(self, ids: Sequence[str]) -> None:
        for rid in ids:
            self._records.pop(rid, None)

    async def get_all(self) -> list[VectorRecord]:
        return list(self._records.values())

    async def query(self, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        scored = [
            (rid, sum(a * b for a, b in zip(vector, rec.vector, strict=True))) for rid, rec in self._records.items()
        ]
        scored.sort(key=lambda pair: -pair[1])
        return scored[:k]

    async def aclose(self) -> None:
        self._records.clear()
