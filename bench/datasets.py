"""Loaders for the tool-selection benchmark sets under ``../shared/benchmarks/tool-selection``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "tool-selection"
HERE = Path(__file__).resolve().parent
MANIFESTS = HERE.parent / "src" / "hanzo_hub" / "catalog" / "manifests"
CATALOG_QUERIES = HERE / "queries" / "catalog.jsonl"


@dataclass(frozen=True)
class Query:
    """One query with its gold items; each item is a set of acceptable tool ids (any-of)."""

    text: str
    gold: list[frozenset[str]]
    split: str = "test"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def live_tools(root: Path = DATA) -> list[dict[str, Any]]:
    return [
        {
            "tool_id": row["tool_id"],
            "server": row["server"],
            "name": row["name"],
            "description": row.get("description") or "",
            "inputSchema": row.get("inputSchema") or {},
            "category": row.get("server_category") or "",
            "server_description": row.get("server_description") or "",
        }
        for row in _jsonl(root / "livemcpbench" / "tool_catalog.jsonl")
    ]


def pp_tools(root: Path = DATA) -> list[dict[str, Any]]:
    return [
        {
            "tool_id": row["tool_id"],
            "server": row["server"],
            "name": row["name"],
            "description": row.get("description") or "",
            "inputSchema": row.get("inputSchema") or {},
            "category": row.get("category") or "",
        }
        for row in _jsonl(root / "mcptoolbenchpp" / "tool_catalog.jsonl")
    ]


def live_queries(root: Path = DATA) -> list[Query]:
    out = []
    for row in _jsonl(root / "livemcpbench" / "tasks_gold.jsonl"):
        gold = [frozenset(g["candidate_tool_ids"]) for g in row["gold_tools"] if g["candidate_tool_ids"]]
        if gold:
            out.append(Query(row["query"], gold))
    return out


def pp_queries(root: Path = DATA, *, alternatives: bool = True) -> list[Query]:
    out = []
    for row in _jsonl(root / "mcptoolbenchpp" / "queries.jsonl"):
        gold = [
            frozenset([g["tool_id"], *(g.get("acceptable_alternatives") or [] if alternatives else [])])
            for g in row["gold"]
        ]
        out.append(Query(row["query"], gold))
    return out


def pooled_tools(root: Path = DATA) -> list[dict[str, Any]]:
    """LiveMCPBench and MCPToolBench++ tools together, deduplicated by tool id (571)."""
    seen: dict[str, dict[str, Any]] = {}
    for tool in [*live_tools(root), *pp_tools(root)]:
        seen.setdefault(tool["tool_id"], tool)
    return list(seen.values())


def catalog_tools(root: Path = MANIFESTS) -> list[dict[str, Any]]:
    """The catalog's exposed tools (snapshot tools minus hidden overrides; fixture servers left out), 734 of them.

    Ids are ``<catalog id>__<tool>``, the names the hub exposes (long catalog ids get a shorter alias in the hub).
    """
    out = []
    for folder in sorted(p for p in root.iterdir() if (p / "server.json").exists()):
        server = json.loads((folder / "server.json").read_text())
        meta = server["_meta"]["dev.hanzo-hub/catalog"]
        if meta.get("origin") == "fixture" or not (folder / "tools.json").exists():
            continue  # fixture servers are test doubles; an entry without tools.json lists its tools from user data
        hidden = {n for n, fix in meta.get("toolOverrides", {}).items() if fix.get("hidden")}
        for tool in json.loads((folder / "tools.json").read_text())["tools"]:
            if tool["name"] in hidden:
                continue
            out.append(
                {
                    "tool_id": f"{meta['id']}__{tool['name']}",
                    "server": meta["id"],
                    "name": tool["name"],
                    "description": tool.get("description") or "",
                    "inputSchema": tool.get("inputSchema") or {},
                    "category": meta.get("category") or "",
                    "server_description": server.get("description") or "",
                }
            )
    return out


def _split(text: str) -> str:
    """A fixed half of the queries for tuning ("dev"), the other half held out ("test")."""
    return "dev" if hashlib.sha1(text.encode()).digest()[0] % 2 == 0 else "test"


def catalog_queries(path: Path = CATALOG_QUERIES, *, alternatives: bool = True) -> list[Query]:
    """Our own catalog query set. Each ``gold`` id is one need; ``alternatives`` lists groups of tools that serve a
    need equally well: a gold id that is in a group is satisfied by any member of that group."""
    out = []
    for row in _jsonl(path):
        groups = [set(g) for g in row.get("alternatives", [])] if alternatives else []
        gold = [frozenset(next((g for g in groups if tid in g), {tid})) for tid in row["gold"]]
        out.append(Query(row["query"], gold, _split(row["query"])))
    return out
