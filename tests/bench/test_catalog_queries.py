"""The catalog query set of the tool-selection benchmark stays loadable and consistent with the catalog."""

import importlib.util
import json
import sys
from pathlib import Path

# loaded by path under its own name: a bare ``import datasets`` could meet Hugging Face's package of that name
_spec = importlib.util.spec_from_file_location(
    "hanzo_bench_datasets", Path(__file__).resolve().parents[2] / "bench" / "datasets.py"
)
assert _spec is not None
assert _spec.loader is not None
ds = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(ds)


def test_every_listed_catalog_entry_is_benchmarked_and_every_gold_tool_exists() -> None:
    tools = ds.catalog_tools()
    ids = {t["tool_id"] for t in tools}
    assert len(ids) == len(tools)
    servers = {t["server"] for t in tools}
    listed = {
        p.name
        for p in ds.MANIFESTS.iterdir()
        if (p / "tools.json").exists()
        and json.loads((p / "server.json").read_text())["_meta"]["dev.hanzo-hub/catalog"].get("origin") != "fixture"
    }
    assert servers == listed  # an entry whose tools come from the user's data (no tools.json) is left out
    queries = ds.catalog_queries()
    assert len(queries) >= 300
    missing = sorted({tid for q in queries for group in q.gold for tid in group} - ids)
    assert missing == []
    assert {q.split for q in queries} == {"dev", "test"}
