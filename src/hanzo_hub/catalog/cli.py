"""``hanzo-hub catalog …``: list, show, install, refresh, enable, disable, stats and add cataloged servers.

```
hanzo-hub catalog list [--json]
hanzo-hub catalog show ID
hanzo-hub catalog install ID... | --all [--force] [--no-verify]
hanzo-hub catalog refresh ID... | --all
hanzo-hub catalog enable ID... / disable ID...
hanzo-hub catalog stats [--json]
hanzo-hub catalog add NAME --from-json '{"command": ..., "args": [...], "env": {...}}' --category CAT
```

``cli.py`` registers the group with :func:`register` and runs it with :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import Any

import anyio
from mcp import MCPError
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from hanzo_hub.catalog.envs import InstallEvent, install, is_installed
from hanzo_hub.catalog.loader import (
    Catalog,
    CatalogEntry,
    enabled_ids,
    entry_spec,
    load_catalog,
    read_state,
    user_manifest_dir,
    write_state,
)
from hanzo_hub.catalog.models import CATEGORIES, META_KEY, REGISTRY_SCHEMA
from hanzo_hub.catalog.probe import ToolDiff, verify
from hanzo_hub.config import HubSettings
from hanzo_hub.errors import CatalogError, InstallFailed

SettingsFactory = Callable[[argparse.Namespace], HubSettings]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``catalog`` command group to the top-level subparsers."""
    catalog = commands.add_parser("catalog", help="the catalog of downstream servers")
    sub = catalog.add_subparsers(dest="catalog_command", required=True)
    listing = sub.add_parser("list", parents=[common], help="every cataloged server")
    listing.add_argument("--json", action="store_true")
    show = sub.add_parser("show", parents=[common], help="one server's manifest, launch and tools")
    show.add_argument("id")
    for name, text in (("install", "build servers' environments"), ("refresh", "re-capture live tool lists")):
        cmd = sub.add_parser(name, parents=[common], help=text)
        cmd.add_argument("ids", nargs="*", metavar="ID")
        cmd.add_argument("--all", action="store_true", help="every cataloged server")
        if name == "install":
            cmd.add_argument("--force", action="store_true", help="rebuild even if current")
            cmd.add_argument("--no-verify", action="store_true", help="do not start the server afterwards")
    for name in ("enable", "disable"):
        cmd = sub.add_parser(name, parents=[common], help=f"{name} servers in the hub")
        cmd.add_argument("ids", nargs="+", metavar="ID")
    stats = sub.add_parser("stats", parents=[common], help="tools per category, live-verified vs snapshot-only")
    stats.add_argument("--json", action="store_true")
    add = sub.add_parser("add", parents=[common], help="turn a Claude-style mcpServers entry into a manifest")
    add.add_argument("name")
    add.add_argument("--from-json", required=True, dest="entry", help='e.g. \'{"command": "uvx", "args": [...]}\'')
    add.add_argument("--category", required=True, choices=CATEGORIES)
    add.add_argument("--description", default=None)


def run(args: argparse.Namespace, make_settings: SettingsFactory) -> int:
    """Run one ``catalog`` subcommand; returns the exit status."""
    settings = make_settings(args)
    console = Console()
    handler = _HANDLERS[args.catalog_command]
    try:
        return handler(args, settings, console)
    except CatalogError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        return 1


def _catalog(settings: HubSettings, console: Console) -> Catalog:
    catalog = load_catalog(settings)
    for error in catalog.errors:
        console.print(f"[yellow]skipped broken manifest[/yellow] {error}", highlight=False)
    return catalog


def _pick(args: argparse.Namespace, catalog: Catalog, console: Console) -> list[CatalogEntry] | None:
    ids = [i for i, e in catalog.entries.items() if e.meta.origin != "fixture"] if args.all else args.ids
    missing = [i for i in ids if i not in catalog.entries]
    if missing or not ids:
        console.print(f"[red]unknown catalog ids:[/red] {', '.join(missing)}" if missing else "name IDs or --all")
        return None
    return [catalog.entries[i] for i in ids]


def _visible(entry: CatalogEntry) -> list[str]:
    hidden = {name for name, o in entry.meta.tool_overrides.items() if o.hidden}
    return [n for n in (entry.tools.names if entry.tools else []) if n not in hidden]


def _cmd_list(args: argparse.Namespace, settings: HubSettings, console: Console) -> int:
    catalog = _catalog(settings, console)
    enabled = set(enabled_ids(settings, catalog))
    rows = [
        {
            "id": e.id,
            "category": e.meta.category,
            "package": " ".join(f"{p.registry_type}:{p.identifier}=={p.version}" for p in e.server.packages),
            "tools": len(_visible(e)),
            "offline": e.meta.offline.status,
            "installed": is_installed(settings, e),
            "enabled": e.id in enabled,
        }
        for e in catalog.entries.values()
    ]
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    table = Table(title=f"catalog ({len(rows)} servers)")
    for column in ("id", "category", "package", "tools", "offline", "installed", "enabled"):
        table.add_column(column, justify="right" if column == "tools" else "left")
    for row in rows:
        table.add_row(*("yes" if v is True else "" if v is False else str(v) for v in row.values()))
    console.print(table)
    return 0


def _cmd_show(args: argparse.Namespace, settings: HubSettings, console: Console) -> int:
    catalog = _catalog(settings, console)
    entry = catalog.entries.get(args.id)
    if entry is None:
        console.print(f"[red]unknown catalog id[/red] {args.id}")
        return 1
    spec = entry_spec(settings, entry)
    console.print(f"[bold]{entry.id}[/bold] ({entry.server.name} {entry.server.version}): {entry.server.description}")
    console.print(
        f"category {entry.meta.category}; offline {entry.meta.offline.status}; network {entry.meta.sandbox.network}"
    )
    console.print(f"launch: {spec.command} {' '.join(spec.args)}", highlight=False)
    if spec.env:
        console.print(f"env: {spec.env}", highlight=False)
    console.print(f"installed: {is_installed(settings, entry)}; tools from {entry.tools_origin}")
    variables = [var for package in entry.server.packages for var in package.environment_variables]
    if variables:
        settings_table = Table("variable", "needs", "description")
        for var in variables:
            needs = (("required", var.is_required), ("from the vault", var.is_secret), ("set", var.name in spec.env))
            settings_table.add_row(var.name, ", ".join(word for word, on in needs if on), var.description or "")
        console.print(settings_table)
    if entry.tools is None:
        console.print(
            "no tool snapshot: the tools are generated from the server's configuration; the hub lists them live on"
            f" first start and 'hanzo-hub catalog refresh {entry.id}' stores them",
            highlight=False,
        )
        return 0
    table = Table("tool", "description")
    for tool in entry.tools.tools if entry.tools else []:
        override = entry.meta.tool_overrides.get(str(tool.get("name")))
        name = str(tool.get("name")) + (" (hidden)" if override and override.hidden else "")
        table.add_row(name, str(tool.get("description") or "").split("\n")[0][:100])
    console.print(table)
    return 0


def _report_diff(console: Console, entry_id: str, difference: ToolDiff, count: int) -> None:
    if difference.same:
        console.print(f"[green]{entry_id}[/green]: {count} tools, same as the snapshot")
        return
    console.print(f"[yellow]{entry_id}[/yellow]: {count} tools live; differs from the snapshot:")
    for label, names in (("added", difference.added), ("removed", difference.removed), ("changed", difference.changed)):
        if names:
            console.print(f"  {label}: {', '.join(names)}", highlight=False)


async def _verify_one(settings: HubSettings, entry: CatalogEntry, console: Console, *, update: bool) -> bool:
    try:
        snapshot, difference = await verify(settings, entry, update=update)
    except (OSError, TimeoutError, MCPError) as exc:
        needs = entry.meta.requires.services
        hint = f" (it needs {', '.join(needs)} running; see 'hanzo-hub catalog show {entry.id}')" if needs else ""
        console.print(f"[red]{entry.id}[/red]: could not list its tools live: {type(exc).__name__} {exc}{hint}")
        return False
    _report_diff(console, entry.id, difference, len(snapshot.tools))
    return update or difference.same


def _cmd_install(args: argparse.Namespace, settings: HubSettings, console: Console) -> int:
    catalog = _catalog(settings, console)
    entries = _pick(args, catalog, console)
    if entries is None:
        return 2
    failures: list[InstallFailed] = []

    async def main() -> None:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[step]}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            tasks: dict[str, TaskID] = {e.id: progress.add_task(e.id, total=None, step="") for e in entries}

            def on_event(event: InstallEvent) -> None:
                progress.update(tasks[event.server], total=event.total, completed=event.step, step=event.message)

            for entry in entries:
                try:
                    await install(settings, entry, force=args.force, progress=on_event)
                except InstallFailed as exc:
                    failures.append(exc)
                    progress.update(tasks[entry.id], step="[red]failed[/red]")
        if not args.no_verify:
            for entry in entries:
                if is_installed(settings, entry):
                    await _verify_one(settings, entry, console, update=False)

    anyio.run(main)
    for failure in failures:
        console.print(f"[red]install failed[/red] {failure}", highlight=False)
    return 1 if failures else 0


def _cmd_refresh(args: argparse.Namespace, settings: HubSettings, console: Console) -> int:
    catalog = _catalog(settings, console)
    entries = _pick(args, catalog, console)
    if entries is None:
        return 2

    async def main() -> int:
        ok = True
        for entry in entries:
            if not is_installed(settings, entry):
                console.print(f"[red]{entry.id}[/red]: not installed (hanzo-hub catalog install {entry.id})")
                ok = False
                continue
            ok = await _verify_one(settings, entry, console, update=True) and ok
        return 0 if ok else 1

    return anyio.run(main)


def _toggle(args: argparse.Namespace, settings: HubSettings, console: Console) -> int:
    catalog = _catalog(settings, console)
    unknown = [i for i in args.ids if i not in catalog.entries]
    if unknown:
        console.print(f"[red]unknown catalog ids:[/red] {', '.join(unknown)}")
        return 2
    state = read_state(settings)
    on = args.catalog_command == "enable"
    add_to, remove_from = (state.enabled, state.disabled) if on else (state.disabled, state.enabled)
    add_to.extend(args.ids)
    remove_from[:] = [i for i in remove_from if i not in args.ids]
    write_state(settings, state)
    console.print(f"{args.catalog_command}d: {', '.join(args.ids)}")
    return 0


def stats(settings: HubSettings, catalog: Catalog) -> dict[str, Any]:
    """Tools per category (visible tools only; fixtures left out), live-verified vs snapshot-only."""
    verified = read_state(settings).verified
    per: dict[str, dict[str, int]] = {
        c: {"servers": 0, "tools": 0, "verified": 0, "snapshot_only": 0} for c in CATEGORIES
    }
    servers: dict[str, dict[str, Any]] = {}
    origins: dict[str, dict[str, int]] = {}
    for entry in catalog.entries.values():
        if entry.meta.origin == "fixture":
            continue
        count = len(_visible(entry))
        live = entry.tools is not None and verified.get(entry.id) == entry.tools.sha256
        for row in (
            per[entry.meta.category],
            origins.setdefault(entry.meta.origin, dict.fromkeys(per[CATEGORIES[0]], 0)),
        ):
            row["servers"] += 1
            row["tools"] += count
            row["verified" if live else "snapshot_only"] += count
        servers[entry.id] = {
            "category": entry.meta.category,
            "origin": entry.meta.origin,
            "tools": count,
            "verified": live,
        }
    total = {k: sum(r[k] for r in per.values()) for k in ("servers", "tools", "verified", "snapshot_only")}
    return {"categories": per, "total": total, "origins": origins, "servers": servers}


def _cmd_stats(args: argparse.Namespace, settings: HubSettings, console: Console) -> int:
    data = stats(settings, _catalog(settings, console))
    if args.json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return 0
    table = Table("category", "servers", "tools", "live-verified", "snapshot-only", title="catalog tools")
    for category, row in data["categories"].items():
        table.add_row(category, *(str(row[k]) for k in ("servers", "tools", "verified", "snapshot_only")))
    total = data["total"]
    table.add_row("[bold]total[/bold]", *(str(total[k]) for k in ("servers", "tools", "verified", "snapshot_only")))
    for origin, row in sorted(data["origins"].items()):
        table.add_row(f"  of which {origin}", *(str(row[k]) for k in ("servers", "tools", "verified", "snapshot_only")))
    console.print(table)
    return 0


_SPEC_RE = re.compile(r"^(?P<name>@?[^@=\s]+)(?:(?:@|==)(?P<version>[^\s]+))?$")


def manifest_from_entry(name: str, entry: dict[str, Any], category: str, description: str | None) -> dict[str, Any]:
    """A manifest for a Claude Desktop style entry; the launch is kept verbatim (``npx``/``uvx`` fetch on start).

    Raises:
        CatalogError: the entry has no ``command``.
    """
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise CatalogError(f"entry '{name}' needs a 'command' (only stdio entries become manifests)")
    args = [str(a) for a in entry.get("args", [])]
    env = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
    server_id = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:24] or "server"
    packages = []
    words = [a for a in args if not a.startswith("-")]
    runner = {"npx": "npm", "uvx": "pypi"}.get(command.rsplit("/", 1)[-1])
    match = _SPEC_RE.match(words[0]) if runner and words else None
    if runner and match:
        packages.append(
            {
                "registryType": runner,
                "identifier": match["name"],
                "version": match["version"] or "0.0.0-unpinned",
                "runtimeHint": command.rsplit("/", 1)[-1],
                "transport": {"type": "stdio"},
                "environmentVariables": [{"name": k, "isSecret": True} for k in env],
            }
        )
    meta = {
        "id": server_id,
        "category": category,
        "origin": "user",
        "install": {"kind": "none"},
        "launch": {"command": command, "args": [a.replace("{", "{{").replace("}", "}}") for a in args], "env": env},
        "offline": {"status": "plausible", "notes": "added from a client entry; run 'hanzo-hub catalog refresh'"},
        "sandbox": {"network": "none"},
    }
    return {
        "$schema": REGISTRY_SCHEMA,
        "name": f"local/{server_id}",
        "description": (description or f"{name} (added from a client config)")[:100],
        "version": "0.0.0",
        "packages": packages,
        "_meta": {META_KEY: meta},
    }


def _cmd_add(args: argparse.Namespace, settings: HubSettings, console: Console) -> int:
    try:
        entry = json.loads(args.entry)
    except json.JSONDecodeError as exc:
        console.print(f"[red]--from-json is not JSON:[/red] {exc}")
        return 2
    if isinstance(entry, dict) and "mcpServers" in entry:
        entry = entry["mcpServers"].get(args.name, next(iter(entry["mcpServers"].values()), {}))
    manifest = manifest_from_entry(args.name, entry if isinstance(entry, dict) else {}, args.category, args.description)
    server_id = manifest["_meta"][META_KEY]["id"]
    target = user_manifest_dir(settings) / server_id / "server.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    catalog = load_catalog(settings)
    if server_id not in catalog.entries:
        problems = [str(e) for e in catalog.errors if e.path == str(target)]
        console.print(f"[red]the new manifest does not load:[/red] {'; '.join(problems)}")
        return 1
    console.print(f"added {server_id} at {target}; next: hanzo-hub catalog refresh {server_id}")
    return 0


_HANDLERS: dict[str, Callable[[argparse.Namespace, HubSettings, Console], int]] = {
    "list": _cmd_list,
    "show": _cmd_show,
    "install": _cmd_install,
    "refresh": _cmd_refresh,
    "enable": _toggle,
    "disable": _toggle,
    "stats": _cmd_stats,
    "add": _cmd_add,
}
