"""``hanzo-hub memory``: recall, export, import and consolidate memories from the command line.

The store is the hub's own (``<home>/memory`` or ``memory.path``), opened the way the hub opens it, so the hub must
not be running on the same store (its lock says so, and the command exits 2 with that message). The scope is the
local user (``--user`` to act for another) and the default project, a project id (``--project``) or the id the
hub derives from a project folder given to it as an MCP root (``--project-root``). Only the persisted tiers
(project, global) exist outside a running hub.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from hanzo_hub.config import HubSettings
from hanzo_hub.errors import MemoryStoreError
from hanzo_hub.hub.memory_mount import DEFAULT_PROJECT
from hanzo_hub.hub.project import project_id
from hanzo_hub.memory import MemoryScope, MemoryService
from hanzo_hub.memory.consolidate import Consolidator
from hanzo_hub.memory.models import Tier
from hanzo_hub.vectors import build_embedder

__all__ = ["register", "run"]

SettingsFactory = Callable[[argparse.Namespace], HubSettings]
PERSISTED: tuple[Tier, ...] = ("project", "global")


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``memory`` command group to the top-level subparsers."""
    scope = argparse.ArgumentParser(add_help=False)
    scope.add_argument("--user", help="act for this user (default: the local user)")
    which = scope.add_mutually_exclusive_group()
    which.add_argument("--project", help=f"project id (default: {DEFAULT_PROJECT!r})")
    which.add_argument("--project-root", type=Path, help="a project folder, as a client would give it as a root")
    scope.add_argument("--tier", choices=PERSISTED, action="append", help="only this tier (repeatable)")

    memory = commands.add_parser(
        "memory", help="recall, export, import and consolidate memories (with the hub stopped)"
    )
    sub = memory.add_subparsers(dest="memory_command", required=True)
    recall = sub.add_parser("recall", parents=[common, scope], help="the memories recall would return for a query")
    recall.add_argument("query")
    recall.add_argument("--limit", type=int, default=10)
    recall.add_argument("--json", action="store_true", help="machine-readable output")
    export = sub.add_parser("export", parents=[common, scope], help="the scope's memories as JSON Lines")
    export.add_argument("--output", type=Path, help="write here instead of standard output")
    imp = sub.add_parser("import", parents=[common, scope], help="add memories from JSON Lines (re-embedded)")
    imp.add_argument("file", help="a JSON Lines file, or - for standard input")
    tidy = sub.add_parser(
        "consolidate",
        parents=[common, scope],
        help="merge near-duplicates, decay and delete long-unused memories of the scope now",
    )
    tidy.add_argument("--json", action="store_true", help="machine-readable output")


def scope_of(args: argparse.Namespace, settings: HubSettings) -> MemoryScope:
    """The scope the arguments name."""
    if args.project_root is not None:
        project = project_id(args.project_root.resolve().as_uri())
    else:
        project = args.project or DEFAULT_PROJECT
    return MemoryScope(user=args.user or settings.user, project=project, session="cli")


def run(args: argparse.Namespace, make_settings: SettingsFactory) -> int:
    """Run a ``memory`` subcommand; returns the exit status."""
    settings = make_settings(args)
    scope = scope_of(args, settings)
    tiers: tuple[Tier, ...] = tuple(args.tier) if args.tier else PERSISTED
    text = None
    if args.memory_command == "import":
        try:
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"hanzo-hub: cannot read {args.file}: {exc}", file=sys.stderr)
            return 2
    try:
        return int(anyio.run(_run, args, settings, scope, tiers, text))
    except MemoryStoreError as exc:
        print(f"hanzo-hub: {exc}", file=sys.stderr)
        return 2


async def _run(
    args: argparse.Namespace, settings: HubSettings, scope: MemoryScope, tiers: tuple[Tier, ...], text: str | None
) -> int:
    embedder = build_embedder(settings.memory.embedder, settings.embedding, home=settings.home)
    async with MemoryService.open(settings.memory, settings.memory_dir, embedder) as service:
        if args.memory_command == "recall":
            return await _recall(service, scope, tiers, args)
        if args.memory_command == "consolidate":
            return await _consolidate(service, scope, args)
        if args.memory_command == "export":
            body = await service.export(scope, tiers)
            if args.output is None:
                sys.stdout.write(body)
            else:
                args.output.write_text(body, encoding="utf-8")
                print(f"exported {body.count(chr(10))} memories of {scope.user}/{scope.project} to {args.output}")
            return 0
        tier = tiers[0] if len(tiers) == 1 else None
        added = await service.import_jsonl(scope, text or "", tier=tier)
        print(f"imported {len(added)} memories into {scope.user}/{scope.project}")
        return 0


async def _consolidate(service: MemoryService, scope: MemoryScope, args: argparse.Namespace) -> int:
    """One consolidation pass over the scope's persisted tiers (no LLM here: generalizing is skipped)."""
    report = await Consolidator(service).run(scope)
    done = dataclasses.asdict(report)
    if args.json:
        print(json.dumps({"user": scope.user, "project": scope.project, **done}))
        return 0
    counts = ", ".join(f"{len(ids)} {step}" for step, ids in done.items() if step != "skipped")
    print(f"consolidated {scope.user}/{scope.project}: {counts}")
    for reason in report.skipped:
        print(f"  skipped {reason}")
    return 0


async def _recall(service: MemoryService, scope: MemoryScope, tiers: tuple[Tier, ...], args: argparse.Namespace) -> int:
    hits = await service.recall(scope, args.query, tiers=tiers, limit=args.limit)
    if args.json:
        rows = [
            {"id": h.entry.id, "tier": h.tier, "score": round(h.score, 4), "why": h.why, "content": h.entry.content,
             "created_at": h.entry.created_at}
            for h in hits
        ]  # fmt: skip
        print(json.dumps({"user": scope.user, "project": scope.project, "query": args.query, "memories": rows}))
        return 0
    if not hits:
        print(f"no memories of {scope.user}/{scope.project} match")
    for rank, hit in enumerate(hits, 1):
        print(f"{rank:>2}. [{hit.tier}] {hit.entry.content}\n    {hit.why}")
    return 0
