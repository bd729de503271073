"""``hanzo-hub import``: take the MCP servers already configured in Claude Desktop, Claude Code, Cursor, VS Code.

Each client keeps its servers in its own file and shape; this module knows where and how, validates every entry
with the hub's own spec models, and merges them into the hub's config file, reporting what it took and why it
left anything out. Entries that launch hanzo-hub itself are skipped, so the hub never proxies itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from hanzo_hub.config import ServerSpec, normalize_server_entry, user_config_home
from hanzo_hub.errors import ConfigError

_SPEC: TypeAdapter[Any] = TypeAdapter(ServerSpec)


@dataclass(frozen=True)
class Source:
    """One client config file and the keys that hold server maps in it."""

    client: str
    path: Path
    keys: tuple[tuple[str, ...], ...]


@dataclass
class ImportReport:
    """What an import took and left."""

    taken: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    read: list[str] = field(default_factory=list)


def default_sources(home: Path | None = None, project: Path | None = None) -> list[Source]:
    """Where each client keeps its MCP servers on this platform (user files, then project files)."""
    home = home or Path.home()
    conf = user_config_home(home)
    sources = [
        Source("claude-desktop", conf / "Claude" / "claude_desktop_config.json", (("mcpServers",),)),
        Source("claude-code", home / ".claude.json", (("mcpServers",),)),
        Source("cursor", home / ".cursor" / "mcp.json", (("mcpServers",),)),
        Source("vscode", conf / "Code" / "User" / "mcp.json", (("servers",),)),
        Source("vscode", conf / "Code" / "User" / "settings.json", (("mcp", "servers"),)),
    ]
    if project is not None:
        sources += [
            Source("claude-code", project / ".mcp.json", (("mcpServers",),)),
            Source("cursor", project / ".cursor" / "mcp.json", (("mcpServers",),)),
            Source("vscode", project / ".vscode" / "mcp.json", (("servers",),)),
        ]
    return sources


def file_source(path: Path) -> Source:
    """A user-named file in any of the known shapes."""
    return Source("file", path, (("mcpServers",), ("servers",), ("mcp", "servers")))


def _dig(data: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _is_self(entry: dict[str, Any]) -> bool:
    words = [str(entry.get("command", "")), *map(str, entry.get("args", []) or [])]
    return any(Path(w).name == "hanzo-hub" or w == "hanzo_hub" for w in words)


def collect(sources: list[Source], existing: dict[str, Any]) -> ImportReport:
    """Read every source that exists and decide, entry by entry, what to take."""
    report = ImportReport()
    for source in sources:
        if not source.path.is_file():
            continue
        try:
            data = json.loads(source.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            report.skipped.append((source.client, str(source.path), f"unreadable: {exc}"))
            continue
        report.read.append(str(source.path))
        for keys in source.keys:
            block = _dig(data, keys)
            if isinstance(block, dict):
                _take(report, source, block, existing)
    return report


def _take(report: ImportReport, source: Source, block: dict[str, Any], existing: dict[str, Any]) -> None:
    for name, entry in block.items():
        label = f"{name} ({source.client}: {source.path})"
        if name in existing or name in report.taken:
            report.skipped.append((source.client, name, "a server of that name is already configured"))
            continue
        if not isinstance(entry, dict):
            report.skipped.append((source.client, name, "entry is not an object"))
            continue
        if _is_self(entry):
            report.skipped.append((source.client, name, "it launches hanzo-hub itself"))
            continue
        try:
            _SPEC.validate_python(normalize_server_entry(entry))
        except (ValidationError, ValueError) as exc:
            report.skipped.append((source.client, name, f"invalid: {_short(exc)}"))
            continue
        report.taken[name] = (label, entry)


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'][1:])) or '-'}: {e['msg']}" for e in exc.errors())
    return str(exc)


def merge_into(config_file: Path, report: ImportReport) -> None:
    """Add the taken servers to ``config_file`` under ``mcpServers`` (created if missing), atomically.

    Raises:
        ConfigError: the config file exists but is not a JSON object.
    """
    data: dict[str, Any] = {}
    if config_file.is_file():
        try:
            data = json.loads(config_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"{config_file}: not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{config_file}: the top level must be an object")
    servers = data.setdefault("mcpServers", {})
    for name, (_label, entry) in report.taken.items():
        servers[name] = entry
    config_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = config_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(config_file)
