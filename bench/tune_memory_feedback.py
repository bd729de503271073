"""Choose recall's pseudo-relevance feedback (``memory.feedback_top``, ``memory.feedback_weight``) on the memory
development set, never on the benchmark's questions.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python bench/tune_memory_feedback.py`` (a few minutes on 2 cores; embeds the
development texts into ``bench/.cache/memory`` on the first run; writes ``bench/results/memory_feedback.{json,md}``).

Same data and protocol as ``train_memory_adapter.py``: the 282 development haystacks of ``_memory_dev.py`` (built
from LongMemEval questions outside the benchmark's subset) in two folds, each fold scored with a query adapter
trained on the other fold at the shipped regularisation, under the shipped fusion weights; every (top, weight)
pair of ``GRID`` is scored, 'off' (weight 0) included, and the best mean turn all-evidence@10 + session
all-evidence@5 over the folds gives the defaults.
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
from _memory_retrieval import evaluate
from hanzo_hub.memory.adapter import bundled_path
from hanzo_hub.selection.adapter import QueryAdapter
from train_memory_adapter import cross_fitted, dev_set

GRID = {"feedback_top": [2, 3, 4, 5, 10], "feedback_weight": [0.0, 0.2, 0.4, 0.5, 0.7, 1.0, 1.5]}
OBJECTIVE = ("turn_recall_all@10", "session_recall_all@5")
SHOWN = (*OBJECTIVE, "turn_recall_all@5", "turn_recall_any@10", "session_ndcg@10")


def _shown(key: str, value: Any) -> Any:
    """A table cell: scores to 4 places (the best rows differ in the third)."""
    return f"{value:.4f}" if key in (*SHOWN, "objective") else value


def main() -> None:
    items, vector, hs = dev_set()
    parts = cross_fitted(items, hs, vector, QueryAdapter.load(bundled_path()).info["l2"])
    rows = []
    for top, weight in itertools.product(*GRID.values()):
        if weight == 0 and top != GRID["feedback_top"][0]:
            continue  # off is off, whatever the top
        settings = bench.tiered_settings(**(bench.TUNED | {"feedback_top": top, "feedback_weight": weight}))
        got = [evaluate(part, {"t": bench.tiered(settings)})["t"] for part in parts]
        row: dict[str, Any] = {"feedback_top": top if weight else "-", "feedback_weight": weight}
        row |= {k: round(float(np.mean([g[k] for g in got])), 4) for k in SHOWN}
        row["objective"] = round(sum(row[k] for k in OBJECTIVE), 4)
        rows.append(row)
        print(json.dumps(row), flush=True)
    best = max(rows, key=lambda r: r["objective"])  # first best: the smaller top, then the smaller weight
    keys = list(rows[0])
    md = ["# Memory recall: pseudo-relevance feedback, chosen on the development set", "",
          f"{len(hs)} development haystacks (`_memory_dev.py`, LongMemEval questions outside the benchmark's subset),"
          " two folds, each scored with a query adapter trained on the other fold, shipped fusion weights; columns"
          " are means over the folds. Weight 0 is feedback off. The benchmark's questions are not used.", "",
          md_table(keys, [[_shown(k, r[k]) for k in keys] for r in sorted(rows, key=lambda r: -r["objective"])]), "",
          f"Best: top {best['feedback_top']}, weight {best['feedback_weight']} (objective {best['objective']:.4f}).",
          ""]  # fmt: skip
    write_results("memory_feedback", {"machine": machine_info(), "grid": rows, "best": best}, "\n".join(md))


if __name__ == "__main__":
    main()
