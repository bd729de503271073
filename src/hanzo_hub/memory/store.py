"""Where memories live: one vector collection per (user, project, tier) scope, plus an entry cache and a log.

Every scope is its own collection, named by hashing the scope (``ScopeKey.collection``): a query never needs a
metadata filter (measured 57-126 ms filtered against 2-5 ms unfiltered at 43K-100K entries), and no code path can
reach another user's or project's memories, because it cannot name their collection. Session scopes live in
process memory only. Persisted scopes write each change to a write-ahead log (``wal.py``) with ``fsync`` before
applying it to the vector store, so an acknowledged write survives ``kill -9``. Access statistics change on every
recall; they are kept in memory and flushed to a small per-scope sidecar file (written atomically), never through
the vector store. One process owns a store folder at a time (an ``flock`` on ``LOCK``); inside it, writes to a
scope are serialised by that scope's lock, so concurrent sessions are safe.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt

from hanzo_hub.config import MemorySettings
from hanzo_hub.errors import HubError, MemoryStoreError
from hanzo_hub.memory.lexical import IncrementalBM25
from hanzo_hub.memory.models import MemoryEntry, ScopeKey
from hanzo_hub.memory.vector_cache import QuantizedVectors
from hanzo_hub.memory.wal import WriteAheadLog
from hanzo_hub.vectors import VECTOR_STORES, VectorRecord, VectorStore, load_impl

logger = logging.getLogger(__name__)

ENTRY_KEY = "entry"
DELETE_BATCH = 5000
MEMORY_SEARCH_EF = 400
"""HNSW ``ef_search`` of new memory scopes (``bench/_memory_latency.py`` sweeps it at 100,000 memories)."""


class NumpyVectorStore:
    """An exact in-process ``VectorStore`` on a float32 matrix (session tiers and ``store="memory"``)."""

    def __init__(self) -> None:
        self._records: dict[str, VectorRecord] = {}
        self._ids: list[str] = []
        self._matrix: npt.NDArray[np.float32] | None = None

    async def hashes(self) -> dict[str, str]:
        return {rid: rec.content_hash for rid, rec in self._records.items()}

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        for record in records:
            self._records[record.id] = record
        self._matrix = None

    async def delete(self, ids: Sequence[str]) -> None:
        for rid in ids:
            self._records.pop(rid, None)
        self._matrix = None

    async def get_all(self) -> list[VectorRecord]:
        return list(self._records.values())

    async def query(self, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        if not self._records or k <= 0:
            return []
        if self._matrix is None:
            self._ids = list(self._records)
            self._matrix = np.asarray([self._records[i].vector for i in self._ids], dtype=np.float32)
        sims = self._matrix @ np.asarray(vector, dtype=np.float32)
        k = min(k, len(self._ids))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(self._ids[int(i)], float(sims[i])) for i in top]

    async def aclose(self) -> None:
        self._records.clear()
        self._matrix = None


def _record(entry: MemoryEntry) -> VectorRecord:
    return VectorRecord(entry.id, "", list(entry.embedding), {ENTRY_KEY: entry.to_json()})


class ScopeIndex:
    """The entries of one scope: vectors in a ``VectorStore``, entries cached here, BM25 over their contents, and
    the vectors again, quantised, for recall's feedback (``quantized``)."""

    def __init__(
        self,
        key: ScopeKey,
        vectors: VectorStore,
        wal: WriteAheadLog | None,
        stats: Path | None,
        lexical: IncrementalBM25 | None = None,
    ) -> None:
        self.key = key
        self.vectors = vectors
        self.entries: dict[str, MemoryEntry] = {}
        self.lexical = lexical if lexical is not None else IncrementalBM25()
        self.quantized = QuantizedVectors()
        self._wal = wal
        self._stats = stats
        self._dirty: set[str] = set()
        self._lock = anyio.Lock()

    async def load(self) -> None:
        """Read the collection, replay the log over it, merge access statistics."""
        records = await self.vectors.get_all()
        for record in records:
            self._cache(MemoryEntry.from_dict(json.loads(record.metadata[ENTRY_KEY])))
        self.quantized.put_many([r.id for r in records], [r.vector for r in records])
        if self._wal is not None:
            wal = self._wal
            ops = await anyio.to_thread.run_sync(wal.read)
            if ops:
                await self._replay(ops)
                await anyio.to_thread.run_sync(wal.truncate)
        if self._stats is not None and self._stats.exists():
            stats = json.loads(await anyio.Path(self._stats).read_text())
            for rid, (accessed, count) in stats.items():
                if rid in self.entries:
                    self.entries[rid] = self.entries[rid].evolve(accessed_at=accessed, access_count=count)

    async def _replay(self, ops: list[dict[str, Any]]) -> None:
        puts: dict[str, MemoryEntry] = {}
        for op in ops:
            if op["op"] == "put":
                entry = MemoryEntry.from_dict(op["entry"])
                puts[entry.id] = entry
                self._cache(entry)
            else:
                for rid in op["ids"]:
                    puts.pop(rid, None)
                    self._uncache(rid)
                await self.vectors.delete(op["ids"])
        if puts:
            await self.vectors.upsert([_record(e) for e in puts.values()])
            self.quantized.put_many(list(puts), [e.embedding for e in puts.values()])
        logger.info("memory scope replayed %d logged operations", len(ops))

    def _cache(self, entry: MemoryEntry) -> None:
        self.entries[entry.id] = entry.evolve(embedding=())
        self.lexical.add(entry.id, entry.content, group=entry.source)

    def _uncache(self, rid: str) -> None:
        self.entries.pop(rid, None)
        self.lexical.remove(rid)
        self.quantized.remove(rid)
        self._dirty.discard(rid)

    def _check(self, entries: Iterable[MemoryEntry]) -> None:
        for entry in entries:
            if entry.scope != self.key:
                raise MemoryStoreError("an entry was routed to a scope it does not belong to")
            if not entry.embedding:
                raise MemoryStoreError("an entry must carry its embedding to be stored")

    async def put(self, entries: Sequence[MemoryEntry]) -> None:
        """Store ``entries`` (with embeddings), durably before returning."""
        if not entries:
            return
        self._check(entries)
        async with self._lock:
            if self._wal is not None:
                wal = self._wal
                ops = [{"op": "put", "entry": e.to_dict(with_embedding=True)} for e in entries]
                await anyio.to_thread.run_sync(wal.append, ops)
            await self.vectors.upsert([_record(e) for e in entries])
            for entry in entries:
                self._cache(entry)
            self.quantized.put_many([e.id for e in entries], [e.embedding for e in entries])
            await self._maybe_checkpoint()

    async def delete(self, ids: Sequence[str]) -> list[str]:
        """Remove ``ids`` of this scope; returns those that existed."""
        async with self._lock:
            present = [rid for rid in ids if rid in self.entries]
            if not present:
                return []
            if self._wal is not None:
                wal = self._wal
                await anyio.to_thread.run_sync(wal.append, [{"op": "del", "ids": present}])
            for start in range(0, len(present), DELETE_BATCH):
                await self.vectors.delete(present[start : start + DELETE_BATCH])
            for rid in present:
                self._uncache(rid)
            await self._maybe_checkpoint()
            return present

    async def with_embeddings(self) -> list[MemoryEntry]:
        """Every entry with its embedding (reads the vector store)."""
        vectors = {r.id: r.vector for r in await self.vectors.get_all()}
        return [e.evolve(embedding=tuple(vectors[e.id])) for e in self.entries.values() if e.id in vectors]

    def touch(self, ids: Iterable[str], now: float) -> None:
        """Record an access (in memory; flushed by ``flush_stats``)."""
        for rid in ids:
            entry = self.entries.get(rid)
            if entry is not None:
                self.entries[rid] = entry.evolve(accessed_at=now, access_count=entry.access_count + 1)
                self._dirty.add(rid)

    async def flush_stats(self) -> None:
        """Write access statistics atomically (temporary file, fsync, rename)."""
        if self._stats is None or not self._dirty:
            return
        stats = {rid: (e.accessed_at, e.access_count) for rid, e in self.entries.items() if e.access_count}
        self._dirty.clear()
        await anyio.to_thread.run_sync(_write_atomic, self._stats, json.dumps(stats))

    async def _maybe_checkpoint(self) -> None:
        # Every logged change has been applied to (and committed by) the vector store by now, so the log can go.
        if self._wal is not None and self._wal.size() > self._limit:
            await anyio.to_thread.run_sync(self._wal.truncate)

    _limit = 4 * 1024**2

    async def aclose(self) -> None:
        """Flush statistics and release the log."""
        await self.flush_stats()
        if self._wal is not None:
            self._wal.close()
        await self.vectors.aclose()


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class MemoryStore:
    """Opens scopes lazily and owns them; session scopes are dropped when their session ends."""

    def __init__(self, settings: MemorySettings, root: Path | None) -> None:
        self.settings = settings
        self.root = root
        self._scopes: dict[ScopeKey, ScopeIndex] = {}
        self._session_used: dict[str, float] = {}
        self._opening = anyio.Lock()
        self._lock_file: IO[bytes] | None = None
        self.on_open: Callable[[ScopeIndex], Awaitable[None]] | None = None
        """Runs on each persisted scope as it opens, before anyone reads it (the service applies retention)."""

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, settings: MemorySettings, root: Path | None) -> AsyncIterator[MemoryStore]:
        """Own the store folder (``root``; None keeps nothing on disk) for the life of the context.

        Raises:
            MemoryStoreError: another process holds the folder.
        """
        store = cls(settings, root if settings.store != "memory" else None)
        store._acquire()
        try:
            yield store
        finally:
            with anyio.CancelScope(shield=True):
                await store.aclose()

    def _acquire(self) -> None:
        if self.root is None:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        fh = open(self.root / "LOCK", "ab")  # noqa: SIM115 - held for the store's lifetime
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.close()
            raise MemoryStoreError(f"memory store {self.root} is in use by another process") from exc
        self._lock_file = fh

    def _vectors(self, key: ScopeKey) -> VectorStore:
        if key.tier == "session" or self.root is None:
            return NumpyVectorStore()
        chroma: Any = load_impl(VECTOR_STORES, "chroma")
        s = self.settings
        store: VectorStore = chroma(
            self.root / "chroma", key.collection, host=s.chroma_host, port=s.chroma_port, search_ef=MEMORY_SEARCH_EF
        )
        return store

    async def scope(self, key: ScopeKey) -> ScopeIndex:
        """The index of ``key``, opened (and its log replayed) on first use.

        Raises:
            MemoryStoreError: the scope could not be read.
        """
        index = self._scopes.get(key)
        if index is not None:
            return index
        async with self._opening:
            index = self._scopes.get(key)
            if index is not None:
                return index
            persisted = key.tier != "session" and self.root is not None
            wal = WriteAheadLog(self.root / "wal" / f"{key.collection}.jsonl") if persisted and self.root else None
            stats = self.root / "stats" / f"{key.collection}.json" if persisted and self.root else None
            s = self.settings
            lexical = IncrementalBM25(k1=s.lexical_k1, b=s.lexical_b)
            index = ScopeIndex(key, self._vectors(key), wal, stats, lexical)
            index._limit = self.settings.wal_checkpoint_bytes
            try:
                await index.load()
            except HubError:
                raise
            except (OSError, ValueError, KeyError) as exc:
                raise MemoryStoreError(f"memory scope could not be read: {type(exc).__name__}") from exc
            if persisted and self.on_open is not None:
                await self.on_open(index)
            self._scopes[key] = index
            return index

    def opened(self) -> list[ScopeIndex]:
        """Every scope opened so far."""
        return list(self._scopes.values())

    def holds_sessions(self) -> bool:
        """Whether any session tier holds memories (they live in this process only)."""
        return any(key.tier == "session" and index.entries for key, index in self._scopes.items())

    def session_ids(self) -> list[str]:
        """The client sessions with an open session tier."""
        return sorted({key.session for key in self._scopes if key.tier == "session"})

    def sessions_of(self, session: str) -> list[ScopeIndex]:
        """The open session scopes of client session ``session`` (one per user and project it used)."""
        return [index for key, index in self._scopes.items() if key.tier == "session" and key.session == session]

    def session_used(self, session: str, when: float) -> None:
        """Client session ``session`` read or wrote its memories at ``when``: a listing or a recall that finds
        nothing is use too, which its memories' own times do not show."""
        self._session_used[session] = max(when, self._session_used.get(session, 0.0))

    def session_last_used(self, session: str) -> float:
        """When ``session`` last used its memories (``session_used``; 0: not since it opened)."""
        return self._session_used.get(session, 0.0)

    async def drop_session(self, key: ScopeKey) -> None:
        """Forget a session scope (its session ended)."""
        if not any(k.session == key.session for k in self._scopes if k != key and k.tier == "session"):
            self._session_used.pop(key.session, None)
        index = self._scopes.pop(key, None)
        if index is not None:
            await index.aclose()

    async def aclose(self) -> None:
        """Close every scope and release the folder."""
        for index in list(self._scopes.values()):
            with anyio.move_on_after(10):
                await index.aclose()
        self._scopes.clear()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
