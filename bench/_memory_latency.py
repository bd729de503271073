"""Memory latency at 100,000 memories in one scope: recall end to end, ingestion, disk size.

The scope is a persisted project tier (embedded ChromaDB, write-ahead log) opened through ``MemoryService``. Its
contents are LongMemEval_S user turns with their cached MiniLM vectors (``_memory_embed``); beyond the unique
turns available, each further memory is a pair of real turns (texts joined, vectors averaged and re-normalised),
so every vector is distinct and on the model's manifold. Queries are the LongMemEval questions, each asked once
(nothing cached: the embedder has no cache and the first asking of a text is what is timed).

Recall is timed through ``MemoryService.recall`` (query embedding, vector query, BM25 when the tier is within
``lexical_max_entries``, fusion, the feedback's re-scoring, access bookkeeping) for three embedding paths in the
same run, each on its own third of the questions: the ``SentenceTransformer.encode`` path (the baseline), the direct
torch transformer path, and ONNX Runtime with the int8 query encoder (what recall ships with when onnxruntime is
installed: ``embedding.query_precision`` 'int8'). The ONNX third is asked three times, as shipped, with the feedback
off (``memory.feedback_weight`` 0) and with fp32 query vectors, in rotating order, so the cost of the feedback and
the gain of the int8 queries are read from one run.

The HNSW sweep builds the same vectors into a bare Chroma collection once per ``hnsw:search_ef`` value (Chroma
fixes it when a collection is created) and reports query time and the ANN recall of the top-k against exact search.

Ingestion is timed twice: storing pre-embedded memories (``MemoryService.put``: log fsync, ChromaDB
upsert, caches), and ``remember`` with embedding included on a smaller sample.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hanzo_hub.config import MemorySettings
from hanzo_hub.memory.models import MemoryEntry, MemoryScope
from hanzo_hub.memory.service import MemoryService

SCOPE = MemoryScope(user="bench", project="latency", session="s")
BATCH = 1000


def corpus(texts: Sequence[str], vecs: np.ndarray, size: int, seed: int = 7) -> tuple[list[str], np.ndarray]:
    """``size`` (text, vector) pairs: the real ones first, then mixtures of two real ones."""
    rng = np.random.default_rng(seed)
    out_t, out_v = list(texts[:size]), [vecs[: min(size, len(texts))]]
    extra = size - len(out_t)
    if extra > 0:
        a, b = rng.integers(0, len(texts), extra), rng.integers(0, len(texts), extra)
        mixed = vecs[a] + vecs[b]
        out_v.append(mixed / np.linalg.norm(mixed, axis=1, keepdims=True))
        out_t += [texts[i] + " " + texts[j] for i, j in zip(a.tolist(), b.tolist(), strict=True)]
    return out_t, np.concatenate(out_v).astype(np.float32)


class Embedder:
    """A SentenceTransformer embedder with the query path chosen: its own (``fast``) or the ``encode`` baseline."""

    def __init__(self, inner: Any, fast: bool) -> None:
        self.inner, self.fast = inner, fast
        self.dimension, self.model_id = inner.dimension, inner.model_id

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        array = self.inner.embed_array_sync(texts) if self.fast else self.inner.encode_array_sync(texts)
        return [[float(x) for x in row] for row in array]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.embed_sync, list(texts))


class QueryPathEmbedder(Embedder):
    """Also has the query path recall uses (``embed_queries``): the inner embedder's int8 encoder where it has one."""

    def embed_queries_sync(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.inner.embed_queries_sync(texts)]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.embed_queries_sync, list(texts))


def percentiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "n": len(ms),
    }


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def hnsw_sweep(matrix: np.ndarray, queries: np.ndarray, efs: Sequence[int], k: int) -> dict[str, Any]:
    """Per ``search_ef``: query p50/p95 and mean ANN recall@k against exact search, on a fresh collection each."""
    import chromadb
    from chromadb.config import Settings

    exact = np.argsort(-(queries @ matrix.T), axis=1)[:, :k]
    out: dict[str, Any] = {}
    for ef in efs:
        with tempfile.TemporaryDirectory(prefix="hnsw-") as tmp:
            client = chromadb.PersistentClient(path=tmp, settings=Settings(anonymized_telemetry=False))
            col = client.get_or_create_collection(
                "sweep", embedding_function=None, metadata={"hnsw:space": "cosine", "hnsw:search_ef": ef}
            )
            for start in range(0, len(matrix), 5000):
                end = min(len(matrix), start + 5000)
                col.add(ids=[f"m{i:06d}" for i in range(start, end)], embeddings=matrix[start:end])
            col.query(query_embeddings=queries[:1], n_results=k)
            ms, hits = [], []
            for q, want in zip(queries, exact, strict=True):
                t0 = time.perf_counter()
                got = col.query(query_embeddings=[q], n_results=k, include=["distances"])["ids"][0]
                ms.append((time.perf_counter() - t0) * 1000)
                hits.append(len({int(i[1:]) for i in got} & set(want.tolist())) / k)
            out[f"hnsw search_ef {ef}: vector query"] = percentiles(ms)
            out[f"hnsw search_ef {ef}: ANN recall@{k} vs exact"] = round(float(np.mean(hits)), 4)
            del col, client
    return out


async def run(
    texts: Sequence[str],
    vecs: np.ndarray,
    queries: Sequence[str],
    inners: tuple[Any, Any, Any],
    size: int,
    remember_n: int,
    efs: Sequence[int] = (),
) -> dict[str, Any]:
    """Fill one scope with ``size`` memories, then time recall for the three query paths (``inners``: a torch-only
    embedder, an ONNX Runtime one with fp32 queries and one with int8 queries), ingestion with embedding, and the
    HNSW sweep over ``efs``."""
    torch_inner, onnx_inner, int8_inner = inners
    body, matrix = corpus(texts, vecs, size)
    settings = shipped = MemorySettings(store="chroma")
    no_feedback = settings.model_copy(update={"feedback_weight": 0.0})
    out: dict[str, Any] = {"memories": size, "settings": {"lexical_max_entries": settings.lexical_max_entries,
                                                          "project_k": settings.project.k}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="memlat-") as tmp:
        root = Path(tmp)
        async with MemoryService.open(settings, root, Embedder(onnx_inner, True)) as svc:
            key = SCOPE.key("project")
            started = time.perf_counter()
            for start in range(0, size, BATCH):
                entries = [
                    MemoryEntry(id=f"m{i:06d}", content=body[i], user=key.user, project=key.project, tier="project",
                                created_at=1.7e9 + i, accessed_at=1.7e9 + i,
                                embedding=tuple(matrix[i].tolist()))
                    for i in range(start, min(size, start + BATCH))
                ]  # fmt: skip
                await svc.put(entries)
            put_s = time.perf_counter() - started
            out["ingest_put_per_s"] = round(size / put_s, 1)
            out["ingest_put_s"] = round(put_s, 1)
            for index in svc.store.opened():
                await index.flush_stats()
            out["feedback's vector copy MB (int8, capacity)"] = round(
                sum(index.quantized.nbytes for index in svc.store.opened()) / 1e6, 1
            )
            out["disk_bytes"] = du(root)
            out["disk_mb_per_100k"] = round(du(root) / size * 100_000 / 1e6, 1)
            third = len(queries) // 3
            int8, fp32 = QueryPathEmbedder(int8_inner, True), Embedder(onnx_inner, True)
            int8.embed_queries_sync(["warm up the int8 query encoder"])
            for name, embedder, qs in (
                ("encode (baseline)", Embedder(torch_inner, False), queries[:third]),
                ("direct torch", Embedder(torch_inner, True), queries[third : 2 * third]),
                (f"onnx runtime ({int8_inner.query_runtime_in_use} queries)", int8, queries[2 * third :]),
            ):
                svc.embedder = embedder
                await svc.recall(SCOPE, "warm up " + name, tiers=("project",))
                index = await svc.store.scope(key)
                total, embed_ms, dense_ms, lexical_ms = [], [], [], []
                paired: dict[str, list[float]] = {"feedback off": [], "fp32 queries": [], "fp32 query embedding": []}
                for n, q in enumerate(qs):
                    # the ONNX path (the shipped default: int8 queries) is also timed with the feedback off and with
                    # fp32 query vectors, on the same questions, the three in rotating order
                    modes = [("shipped", shipped, int8), ("feedback off", no_feedback, int8),
                             ("fp32 queries", shipped, fp32)]  # fmt: skip
                    modes = modes[n % 3 :] + modes[: n % 3] if embedder is int8 else [("shipped", shipped, embedder)]
                    for label, mode, path in modes:
                        svc.retriever.settings, svc.embedder = mode, path
                        t0 = time.perf_counter()
                        await svc.recall(SCOPE, q, tiers=("project",))
                        (total if label == "shipped" else paired[label]).append((time.perf_counter() - t0) * 1000)
                    svc.retriever.settings, svc.embedder = shipped, embedder
                    t1 = time.perf_counter()
                    if embedder is int8:
                        vector = int8.embed_queries_sync([q + " ?"])[0]
                        embed_ms.append((time.perf_counter() - t1) * 1000)
                        t1 = time.perf_counter()
                        fp32.embed_sync([q + " ?!"])
                        paired["fp32 query embedding"].append((time.perf_counter() - t1) * 1000)
                    else:
                        vector = svc.embedder.embed_sync([q + " ?"])[0]
                        embed_ms.append((time.perf_counter() - t1) * 1000)
                    t2 = time.perf_counter()
                    await index.vectors.query(vector, 2 * settings.project.k)
                    dense_ms.append((time.perf_counter() - t2) * 1000)
                    t3 = time.perf_counter()
                    index.lexical.search(q, 2 * settings.project.k)
                    index.lexical.search_groups(q, 20)
                    lexical_ms.append((time.perf_counter() - t3) * 1000)
                out[f"recall {name}"] = percentiles(total)
                out[f"part: query embedding {name}"] = percentiles(embed_ms)
                out[f"part: vector query {name}"] = percentiles(dense_ms)
                out[f"part: BM25 entries + conversations {name}"] = percentiles(lexical_ms)
                if embedder is int8:
                    out[f"recall {name}, feedback off (same questions)"] = percentiles(paired["feedback off"])
                    out[f"recall {name}, fp32 query vectors (same questions)"] = percentiles(paired["fp32 queries"])
                    out[f"part: query embedding {name}, fp32"] = percentiles(paired["fp32 query embedding"])
            svc.embedder = Embedder(onnx_inner, True)
            sample = [t + " (again)" for t in texts[:remember_n]]
            started = time.perf_counter()
            for start in range(0, len(sample), 64):
                await svc.remember(SCOPE, sample[start : start + 64], tier="project")
            out["ingest_remember_per_s (embedding included, batches of 64)"] = round(
                len(sample) / (time.perf_counter() - started), 1
            )
    if efs:
        query_vecs = np.asarray(onnx_inner.embed_array_sync(list(queries[:8])), dtype=np.float32)
        query_vecs = np.concatenate([query_vecs, *(onnx_inner.embed_array_sync([q]) for q in queries[8:])])
        out.update(hnsw_sweep(matrix, query_vecs.astype(np.float32), efs, 2 * settings.project.k))
    return out
