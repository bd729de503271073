"""Embedder memory: peak RSS of a process holding the three embedders a hub builds (memory, tool search, router).

``shared``: three embedders built from the same settings (one cache folder), as the hub builds them; they share one
loaded model. ``separate``: the same three, each with its own copy of the cache folder, so each loads its own model
(the hub before the shared load). Each variant runs in a fresh process, alternating, ``--runs`` times; each
embedder embeds one text, so the ONNX sessions are open. Writes ``results/embedder_memory.{json,md}``.

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


def child(mode: str) -> None:
    from hanzo_hub.config import EmbeddingSettings
    from hanzo_hub.vectors import build_embedder

    with tempfile.TemporaryDirectory() as tmp:
        caches = []
        for i in range(3 if mode == "separate" else 1):
            cache = Path(tmp) / f"models-{i}"
            if MODELS.is_dir():
                shutil.copytree(MODELS, cache)  # a warm export: loads, not exports, are measured
            caches.append(cache)
        started = time.perf_counter()
        embedders = []
        for i in range(3):
            embedder = build_embedder("sentence-transformers", EmbeddingSettings(cache_path=caches[i % len(caches)]))
            embedder.embed_sync(["hello world"])
            embedders.append(embedder)
        seconds = time.perf_counter() - started
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"mode": mode, "peak_rss_mb": round(rss), "load_s": round(seconds, 2)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", choices=["shared", "separate"])
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    env = os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE)])}
    rows: dict[str, list[dict[str, float]]] = {"shared": [], "separate": []}
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
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    payload = {"runs": rows, "summary": summary, "rss_ratio_shared_to_separate": round(ratio, 3)}
    (results / "embedder_memory.json").write_text(json.dumps(payload, indent=2) + "\n")
    lines = [
        "# Embedder memory (three embedders, as one hub builds them)",
        "",
        "| variant | peak RSS MB (median) | build + first embed s (median) |",
        "|---|---|---|",
        *(f"| {m} | {s['peak_rss_mb_median']} | {s['load_s_median']} |" for m, s in summary.items()),
        "",
        f"Shared / separate peak RSS: {ratio:.3f} ({args.runs} fresh processes each, alternating).",
        "",
    ]
    (results / "embedder_memory.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
