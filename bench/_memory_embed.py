"""Embed every LongMemEval_S user turn (and each question) once with MiniLM; cached under bench/.cache."""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared/benchmarks/memory/longmemeval_s_cleaned_subset200.json.gz"
CACHE = Path(__file__).resolve().parent / ".cache" / "memory"


def load(limit: int | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(gzip.decompress(DATA.read_bytes()))
    return items[:limit] if limit else items


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def texts_of(items: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(text_key(item["question"]), item["question"])
        for session in item["haystack_sessions"]:
            for turn in session:
                if turn["role"] == "user":
                    seen.setdefault(text_key(turn["content"]), turn["content"])
    return list(seen.values())


def cached(
    texts: list[str], embed_fn: Callable[[Sequence[str]], Any], chunk: int = 2048
) -> dict[str, np.ndarray[Any, Any]]:
    CACHE.mkdir(parents=True, exist_ok=True)
    store: dict[str, np.ndarray[Any, Any]] = {}
    for path in sorted(CACHE.glob("emb-*.npz")):
        with np.load(path) as npz:
            store.update(zip(npz["keys"].tolist(), npz["vecs"], strict=True))
    todo = [t for t in texts if text_key(t) not in store]
    start = time.perf_counter()
    for i in range(0, len(todo), chunk):
        part = todo[i : i + chunk]
        vecs = np.asarray(embed_fn(part), dtype=np.float32)
        keys = np.array([text_key(t) for t in part])
        np.savez(CACHE / f"emb-{int(time.time() * 1000)}.npz", keys=keys, vecs=vecs)
        store.update(zip(keys.tolist(), vecs, strict=True))
        done = i + len(part)
        rate = done / (time.perf_counter() - start)
        print(f"embedded {done}/{len(todo)} ({rate:.0f}/s)", file=sys.stderr, flush=True)
    return store


if __name__ == "__main__":
    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(threads=2, batch_size=64, cache_recent=False)
    items = load(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    all_texts = texts_of(items)
    print(f"{len(items)} questions, {len(all_texts)} unique texts", file=sys.stderr)
    cached(all_texts, emb.embed_array_sync)
