"""The routing replay over several seeds: how much of a held-out number is the router and how much is the split.

Each seed is one full run of ``routing.py --seed N`` (its own 50/50 split of every set, stream order and model
seeds; seed 0 is the main run, ``results/routing.json``). MT-Bench's held-out half is 72 prompts, so one prompt moves
its quality share by up to half a point and a single split can pass or miss the target by luck. This script runs
the seeds (``--jobs`` at a time, one torch thread each) and writes ``results/routing-seeds.{json,md}``: per set and
router, the quality share at 50% of always-best's cost for every seed, their mean, standard deviation and minimum,
how many seeds meet the target and how many are ahead of the kNN baseline of the same seed.

Run: ``python bench/routing_seeds.py --seeds 0,1,2,3,4 --jobs 2`` (``--reuse`` keeps result files already there).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROUTERS = ("bandit", "cascade", "knn", "knn, bandit feedback", "full-info model", "random")
TARGET = 0.95


def _path(seed: int) -> Path:
    return RESULTS / ("routing.json" if seed == 0 else f"routing-seed{seed}.json")


def _run(seed: int) -> float:
    t0 = time.perf_counter()
    env = {**os.environ, "HANZO_BENCH_THREADS": "1"}
    log = RESULTS / f".routing-seed{seed}.log"
    with log.open("w") as fh:
        subprocess.run(
            [sys.executable, str(HERE / "routing.py"), "--seed", str(seed)], env=env, stdout=fh, stderr=fh, check=True
        )
    log.unlink()
    return time.perf_counter() - t0


def aggregate(seeds: list[int]) -> dict[str, Any]:
    runs = {seed: json.loads(_path(seed).read_text()) for seed in seeds}
    out: dict[str, Any] = {"seeds": seeds, "target": TARGET, "sets": {}}
    for name in runs[seeds[0]]["held_out"]:
        rows: dict[str, Any] = {}
        knn = np.array([runs[s]["held_out"][name]["knn"]["quality_share_at_cost"] for s in seeds])
        for router in ROUTERS:
            if router not in runs[seeds[0]]["held_out"][name]:
                continue
            v = np.array([runs[s]["held_out"][name][router]["quality_share_at_cost"] for s in seeds])
            rows[router] = {
                "per_seed": v.tolist(),
                "mean": float(v.mean()),
                "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                "min": float(v.min()),
                "seeds_meeting_target": int((v >= TARGET).sum()),
                "seeds_ahead_of_knn": int((v > knn).sum()),
                "mean_margin_over_knn": float((v - knn).mean()),
            }
        out["sets"][name] = {"n_test": runs[seeds[0]]["held_out"][name]["n_test"], "routers": rows}
    return out


def markdown(r: dict[str, Any]) -> str:
    seeds = r["seeds"]
    head = " | ".join(f"seed {s}" for s in seeds)
    lines = [
        "# Routing replay over seeds: quality share at 50% of always-best's cost, held out",
        "",
        f"Seeds {', '.join(map(str, seeds))}: each is a full run of `routing.py --seed N` (its own 50/50 split of "
        "every set, stream order and model seeds; seed 0 is `routing.json`). 'meet' counts seeds at or above the "
        f"target ({r['target']}); 'ahead' counts seeds above the kNN baseline of the same seed; 'margin' is the mean "
        "difference to it. 'cascade' is the deployed router (math prompts weak-first).",
        "",
        f"| set (held-out n) | router | {head} | mean | sd | min | meet | ahead of kNN | margin |",
        "|---|---|" + "---|" * (len(seeds) + 6),
    ]
    for name, block in r["sets"].items():
        for router, m in block["routers"].items():
            cells = " | ".join(f"{v:.3f}" for v in m["per_seed"])
            ahead = "-" if router == "knn" else f"{m['seeds_ahead_of_knn']}/{len(seeds)}"
            margin = "-" if router == "knn" else f"{m['mean_margin_over_knn']:+.3f}"
            lines.append(
                f"| {name} ({block['n_test']}) | {router} | {cells} | **{m['mean']:.3f}** | {m['sd']:.3f} | "
                f"{m['min']:.3f} | {m['seeds_meeting_target']}/{len(seeds)} | {ahead} | {margin} |"
            )
    if "wall_s" in r:
        lines += ["", "Wall time per seed (s): " + ", ".join(f"{s}: {t:.0f}" for s, t in r["wall_s"].items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reuse", action="store_true", help="keep result files that exist instead of rerunning them")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    todo = [s for s in seeds if not (args.reuse and _path(s).is_file())]
    with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        walls = dict(zip(todo, pool.map(_run, todo), strict=True))
    result = aggregate(seeds)
    if walls:
        result["wall_s"] = {str(s): t for s, t in walls.items()}
    (RESULTS / "routing-seeds.json").write_text(json.dumps(result, indent=2))
    (RESULTS / "routing-seeds.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
