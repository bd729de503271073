"""LongMemEval_S retrieval: BM25, dense (MiniLM), hybrid (RRF) and the tiered pipeline, in one run.

Protocol (LongMemEval's retrieval evaluation): keys are user turns; gold turns are those marked ``has_answer``,
gold sessions are ``answer_session_ids``; abstention questions are skipped. Session ranking = order of first
appearance of a session in the turn ranking. Metrics: recall_any@k, recall_all@k (all evidence in top k), NDCG@10,
at turn and session level, plus turn recall@10 bucketed by how many turns back (from the end of the haystack) the
evidence lies. Embeddings come from ``bench/.cache/memory`` (``bench/_memory_embed.py``); ``--limit N`` runs the
first N questions, and only questions whose turns are all cached are run (the report says how many).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _memory_embed import cached, load, text_key
from hanzo_hub.config import MemorySettings, MemoryTierSettings
from hanzo_hub.memory.models import MemoryEntry, ScopeKey
from hanzo_hub.memory.store import NumpyVectorStore, ScopeIndex
from hanzo_hub.memory.tiers import TieredRetriever
from hanzo_hub.selection.lexical import BM25Index

OUT = Path(__file__).resolve().parent / "results"
BUCKETS = [(0, 10, "first 10 turns back"), (10, 50, "10-50"), (50, 200, "50-200"), (200, 10**9, "beyond 200")]


def rrf(*rankings: list[int], k: float = 60.0) -> list[int]:
    score: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking):
            score[i] = score.get(i, 0.0) + 1 / (k + r + 1)
    return sorted(score, key=lambda i: -score[i])


def ndcg(ranked: list[str], gold: set[str], k: int) -> float:
    dcg = sum(1 / math.log2(r + 2) for r, x in enumerate(ranked[:k]) if x in gold)
    ideal = sum(1 / math.log2(r + 2) for r in range(min(k, len(gold))))
    return dcg / ideal if ideal else 0.0


async def tiered_ranking(turns: list[dict], vecs: np.ndarray, qtext: str, qvec: np.ndarray) -> list[int]:
    tier = MemoryTierSettings(k=50, threshold=0.0)
    settings = MemorySettings(store="memory", project=tier, recency_weight=0.0, relevance_weight=0.0)
    key = ScopeKey("bench", "q", "project")
    index = ScopeIndex(key, NumpyVectorStore(), None, None)
    entries = [
        MemoryEntry(id=str(i), content=t["content"], user="bench", project="q", tier="project", created_at=0.0,
                    accessed_at=0.0, embedding=tuple(float(x) for x in vecs[i]))
        for i, t in enumerate(turns)
    ]  # fmt: skip
    await index.put(entries)
    hits = await TieredRetriever(settings, lambda: 0.0).recall({"project": index}, qtext, qvec.tolist(),
                                                               token_budget=10**9)  # fmt: skip
    return [int(h.entry.id) for h in hits]


def evaluate(items: list[dict], store: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    methods = ["bm25", "dense", "hybrid", "tiered"]
    acc: dict[str, dict[str, list[float]]] = {m: {} for m in methods}
    for item in items:
        turns, sessions, back = [], [], []
        total = sum(len(s) for s in item["haystack_sessions"])
        pos = 0
        for sid, session in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True):
            for turn in session:
                pos += 1
                if turn["role"] == "user":
                    turns.append(turn)
                    sessions.append(sid)
                    back.append(total - pos)
        gold_t = {str(i) for i, t in enumerate(turns) if t.get("has_answer")}
        gold_s = set(item["answer_session_ids"])
        vecs = np.stack([store[text_key(t["content"])] for t in turns])
        qvec = store[text_key(item["question"])]
        dense = np.argsort(-(vecs @ qvec), kind="stable").tolist()
        bm = [i for i, _ in BM25Index([t["content"] for t in turns]).search(item["question"], len(turns))]
        ranks = {"bm25": bm, "dense": dense, "hybrid": rrf(bm, dense)}
        ranks["tiered"] = anyio.run(tiered_ranking, turns, vecs, item["question"], qvec)
        for m, ranking in ranks.items():
            rt = [str(i) for i in ranking]
            rs = list(dict.fromkeys(sessions[i] for i in ranking))
            a = acc[m]
            for k in (5, 10):
                if gold_t:
                    a.setdefault(f"turn_recall_any@{k}", []).append(float(bool(gold_t & set(rt[:k]))))
                    a.setdefault(f"turn_recall_all@{k}", []).append(float(gold_t <= set(rt[:k])))
                a.setdefault(f"session_recall_any@{k}", []).append(float(bool(gold_s & set(rs[:k]))))
                a.setdefault(f"session_recall_all@{k}", []).append(float(gold_s <= set(rs[:k])))
            if gold_t:
                a.setdefault("turn_ndcg@10", []).append(ndcg(rt, gold_t, 10))
            a.setdefault("session_ndcg@10", []).append(ndcg(rs, gold_s, 10))
            for lo, hi, name in BUCKETS:
                for g in gold_t:
                    if lo <= back[int(g)] < hi:
                        a.setdefault(f"turn_recall@10 {name}", []).append(float(g in rt[:10]))
    return {m: {k: round(float(np.mean(v)), 4) for k, v in sorted(a.items())} | {"n": len(items)}
            for m, a in acc.items()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--embed-missing", action="store_true", help="embed uncached texts (slow on 2 cores)")
    args = parser.parse_args()
    items = [i for i in load(args.limit) if not i["question_id"].endswith("_abs")]
    if args.embed_missing:
        from _memory_embed import texts_of
        from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

        store = cached(texts_of(items), SentenceTransformerEmbedder(threads=2).embed_array_sync)
    else:
        store = cached([], lambda texts: [])

    def covered(item: dict) -> bool:
        texts = [item["question"]] + [t["content"] for s in item["haystack_sessions"] for t in s if t["role"] == "user"]
        return all(text_key(t) in store for t in texts)

    runnable = [i for i in items if covered(i)]
    results = evaluate(runnable, store)
    report = {"dataset": "LongMemEval_S cleaned subset200", "questions_requested": len(items),
              "questions_run": len(runnable), "embedder": "all-MiniLM-L6-v2 (max_seq_length 256)",
              "tiered_settings": "project tier k=50 threshold 0.0, BM25 fusion on, recency/relevance off",
              "retrieval": results, "latency": "not run in this session"}  # fmt: skip
    OUT.mkdir(exist_ok=True)
    (OUT / "memory.json").write_text(json.dumps(report, indent=2) + "\n")
    keys = sorted(results["bm25"])
    lines = [f"# Memory retrieval, LongMemEval_S ({len(runnable)} of {len(items)} questions run)", "",
             "| metric | " + " | ".join(results) + " |", "|---" * (len(results) + 1) + "|"]  # fmt: skip
    lines += [f"| {k} | " + " | ".join(str(results[m].get(k, "")) for m in results) + " |" for k in keys]
    (OUT / "memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
