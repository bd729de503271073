"""Embedder memory: peak RSS of a process holding the three embedders a hub builds (memory, tool search, router).

``torch-free``: three embedders built from the same settings (one cache folder holding the checked ONNX export and
its probe vectors, as every start after a hub's first finds it); they share one load, served by ONNX Runtime
without importing torch. ``shared``: the same, but the probe vectors are removed from the copied cache, so the load
goes through torch and sentence-transformers as a hub's first start does (the shipped behaviour before the
torch-free load). ``separate``: the ``shared`` case with each embedder on its own copy of the cache folder, so each
loads its own model (the hub before the shared load). Each variant runs in a fresh process, alternating, ``--runs``
times; each embedder embeds one text and one int8 query, so the ONNX sessions are open; the time covers importing
the libraries, loading and the first vectors. Writes ``results/embedder_memory.{json,md}``.

``HF_HUB_OFFLINE=1 .venv/bin/python bench/embedder_memory.py [--runs 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = HERE / ".cache" / "models"


MODES = ("torch-free", "shared", "separate")


def prepare() -> None:
    """A warm cache under ``MODELS``: the export, its probe vectors and the int8 copy (written once)."""
    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(cache_dir=MODELS, query_precision="int8")
    embedder.embed_queries_sync(["hello world"])
    if not list(MODELS.glob("*.probe.npz")):
        raise SystemExit(f"no probe vectors under {MODELS}: the torch-free variant cannot be measured")


def peak_rss_mb() -> float:
    """This process image's peak RSS (``VmHWM``; ``ru_maxrss`` would count the forking parent's peak too)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(mode: str) -> None:
    from hanzo_hub.config import EmbeddingSettings
    from hanzo_hub.vectors import build_embedder

    with tempfile.TemporaryDirectory() as tmp:
        caches = []
        for i in range(3 if mode == "separate" else 1):
            cache = Path(tmp) / f"models-{i}"
            shutil.copytree(MODELS, cache)  # a warm export: loads, not exports, are measured
            if mode != "torch-free":
                for probe in cache.glob("*.probe.npz"):
                    probe.unlink()
            caches.append(cache)
        started = time.perf_counter()
        embedders = []
        for i in range(3):
            settings = EmbeddingSettings(cache_path=caches[i % len(caches)], query_precision="int8")
            embedder = build_embedder("sentence-transformers", settings)
            embedder.embed_sync(["hello world"])
            embedder.embed_queries_sync(["where is the deploy key"])
            embedders.append(embedder)
        seconds = time.perf_counter() - started
        rss = peak_rss_mb()
        torch = "torch" in sys.modules
        print(json.dumps({"mode": mode, "peak_rss_mb": round(rss), "load_s": round(seconds, 2), "torch": torch}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", choices=[*MODES, "prepare"])
    args = parser.parse_args()
    if args.child == "prepare":
        return prepare()
    if args.child:
        return child(args.child)
    env = os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE)])}
    subprocess.run([sys.executable, __file__, "--child", "prepare"], env=env, check=True)  # torch stays out of here
    rows: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.runs):
        for mode in rows:
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True, check=True
            )
            rows[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    summary = {
        mode: {
            "peak_rss_mb_median": statistics.median(r["peak_rss_mb"] for r in runs),
            "load_s_median": statistics.median(r["load_s"] for r in runs),
        }
        for mode, runs in rows.items()
    }
    ratio = summary["shared"]["peak_rss_mb_median"] / summary["separate"]["peak_rss_mb_median"]
    free_rss = summary["torch-free"]["peak_rss_mb_median"] / summary["shared"]["peak_rss_mb_median"]
    free_s = summary["torch-free"]["load_s_median"] / summary["shared"]["load_s_median"]
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    payload = {
        "runs": rows,
        "summary": summary,
        "rss_ratio_shared_to_separate": round(ratio, 3),
        "rss_ratio_torch_free_to_shared": round(free_rss, 3),
        "load_ratio_torch_free_to_shared": round(free_s, 3),
    }
    (results / "embedder_memory.json").write_text(json.dumps(payload, indent=2) + "\n")
    lines = [
        "# Embedder memory (three embedders, as one hub builds them)",
        "",
        "| variant | peak RSS MB (median) | build + first embed s (median) |",
        "|---|---|---|",
        *(f"| {m} | {s['peak_rss_mb_median']} | {s['load_s_median']} |" for m, s in summary.items()),
        "",
        f"Shared / separate peak RSS: {ratio:.3f}; torch-free / shared: peak RSS {free_rss:.3f}, build + first"
        f" vectors {free_s:.3f} ({args.runs} fresh processes each, alternating; each embedder embeds a text and an"
        " int8 query; 'shared' and 'separate' load torch, as a hub's first start does).",
        "",
    ]
    (results / "embedder_memory.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
