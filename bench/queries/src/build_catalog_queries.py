"""Build ``bench/queries/catalog.jsonl`` from the hand-written query files ``q*.txt`` next to this script.

Each line of a query file is ``query text || gold gold ...``; a gold token is ``alias:tool`` or several of them
joined by ``|`` when the tools serve the need equally well (the first is the labelled one, all are listed in the
row's ``alternatives``). ``# name`` lines set the category of the rows that follow. Aliases name catalog ids (table
below). Every id is checked against the catalog's exposed tools (snapshot tools minus hidden overrides, fixtures
left out). Run: ``python bench/queries/src/build_catalog_queries.py [--write]``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFESTS = HERE.parents[2] / "src" / "hanzo_hub" / "catalog" / "manifests"
OUT = HERE.parent / "catalog.jsonl"

ALIASES = {
    "api": "api",
    "cw": "aws-cloudwatch",
    "iam": "aws-iam",
    "sq": "aws-sns-sqs",
    "ch": "chroma",
    "cd": "chrome-devtools",
    "cli": "cli",
    "cl": "cloud",
    "ce": "code-exec",
    "cr": "code-runner",
    "co": "comms",
    "da": "data",
    "dh": "dbhub",
    "dc": "desktop-commander",
    "dv": "devops",
    "dk": "duckdb",
    "em": "email",
    "xl": "excel",
    "fe": "fetch",
    "fi": "files",
    "fs": "filesystem",
    "g": "git",
    "gc": "git-cyanheads",
    "gq": "graphql",
    "jp": "jupyter",
    "md": "markitdown",
    "mc": "memcached",
    "me": "memory",
    "ml": "ml",
    "mf": "mlflow",
    "mo": "motherduck",
    "pw": "playwright",
    "pg": "postgres",
    "rd": "redis",
    "st": "sequential-thinking",
    "sh": "shell",
    "sl": "sqlite",
    "sy": "system",
    "tm": "time",
    "vk": "valkey",
    "ws": "web-search",
}


def exposed_tools() -> dict[str, str]:
    """``server__tool`` → category for every tool the catalog exposes."""
    out: dict[str, str] = {}
    for folder in sorted(MANIFESTS.iterdir()):
        if not (folder / "server.json").exists():
            continue
        meta = json.loads((folder / "server.json").read_text())["_meta"]["dev.hanzo-hub/catalog"]
        if meta.get("origin") == "fixture":
            continue
        hidden = {name for name, fix in meta.get("toolOverrides", {}).items() if fix.get("hidden")}
        for tool in json.loads((folder / "tools.json").read_text())["tools"]:
            if tool["name"] not in hidden:
                out[f"{meta['id']}__{tool['name']}"] = meta["category"]
    return out


def parse(valid: dict[str, str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    category = ""
    for path in sorted(HERE.glob("q*.txt")):
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                category = line[1:].strip()
                continue
            query, tokens = (part.strip() for part in line.split("||"))
            gold: list[str] = []
            alternatives: list[list[str]] = []
            for token in tokens.split():
                ids = [f"{ALIASES[a.split(':', 1)[0]]}__{a.split(':', 1)[1]}" for a in token.split("|")]
                unknown = [i for i in ids if i not in valid]
                if unknown:
                    raise SystemExit(f"unknown tool {unknown} in {path.name}: {query}")
                gold.append(ids[0])
                if len(ids) > 1:
                    alternatives.append(ids)
            row: dict[str, Any] = {"query": query, "gold": gold}
            if alternatives:
                row["alternatives"] = alternatives
            row["category"] = category
            rows.append(row)
    return rows


def main() -> None:
    valid = exposed_tools()
    rows = parse(valid)
    dupes = [q for q, n in Counter(r["query"] for r in rows).items() if n > 1]
    if dupes:
        raise SystemExit(f"duplicate queries: {dupes}")
    multi = sum(len(r["gold"]) > 1 for r in rows)
    covered = {g for r in rows for g in r["gold"]}
    print(f"{len(rows)} queries, {multi} multi-tool, {len(covered)} of {len(valid)} tools are gold somewhere")
    print(dict(Counter(valid[g] for r in rows for g in r["gold"])))
    if "--write" in sys.argv:
        OUT.write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
