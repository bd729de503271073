"""Loaders for the tool-selection benchmark sets under ``../shared/benchmarks/tool-selection``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "tool-selection"


@dataclass(frozen=True)
class Query:
    """One query with its gold items; each item is a set of acceptable tool ids (any-of)."""

    text: str
    gold: list[frozenset[str]]


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
