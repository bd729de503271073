"""Start an installed catalog server, take its live ``tools/list``, and compare it with the stored snapshot."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

from hanzo_hub.catalog.loader import CatalogEntry, entry_spec, home_tools_path, read_state, write_state
from hanzo_hub.catalog.models import ToolsSnapshot, tools_hash
from hanzo_hub.config import HubSettings, StdioServerSpec

MAX_PAGES = 100


@dataclass
class ToolDiff:
    """How a live tool list differs from a stored one (by tool name)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """Whether nothing differs."""
        return not (self.added or self.removed or self.changed)


def diff_tools(old: ToolsSnapshot | None, new: ToolsSnapshot) -> ToolDiff:
    """Compare two tool lists by name, then by content."""
    before = {str(t.get("name")): t for t in (old.tools if old else [])}
    after = {str(t.get("name")): t for t in new.tools}
    return ToolDiff(
        added=sorted(set(after) - set(before)),
        removed=sorted(set(before) - set(after)),
        changed=sorted(n for n in set(before) & set(after) if before[n] != after[n]),
    )


def _dump(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


async def live_tools(spec: StdioServerSpec, timeout: float) -> ToolsSnapshot:
    """Start the server, list its tools (pages merged) and stop it, all within ``timeout`` seconds.

    Raises:
        TimeoutError: the server took longer.
        mcp.MCPError: the server refused ``tools/list``.
        OSError: the command cannot be started.
    """
    try:
        return await _live_tools(spec, timeout)
    except BaseExceptionGroup as group:  # the SDK's task groups wrap the one failure that matters
        raise _leaf(group) from None


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _live_tools(spec: StdioServerSpec, timeout: float) -> ToolsSnapshot:
    params = StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd)
    tools: list[types.Tool] = []
    with anyio.fail_after(timeout):
        async with Client(params, mode=spec.protocol) as client:
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            info = client.server_info
            protocol = client.protocol_version
            caps = client.server_capabilities
    wire = [_dump(t) for t in tools]
    return ToolsSnapshot(
        snapshot_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        protocol_version=protocol,
        server_info=_dump(info) if info else None,
        capabilities=_dump(caps) if caps else {},
        sha256=tools_hash(wire),
        tools=wire,
    )


def write_tools_json(path: Any, snapshot: ToolsSnapshot) -> None:
    """Write a ``tools.json`` (stable key order, so diffs in review stay small)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = snapshot.model_dump(mode="json", by_alias=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


async def verify(settings: HubSettings, entry: CatalogEntry, *, update: bool) -> tuple[ToolsSnapshot, ToolDiff]:
    """Take the live tool list of an installed ``entry`` and compare it with the stored one.

    With ``update`` (``catalog refresh``), the live list is written to ``<home>/catalog/tools/<id>/tools.json``
    (never the packaged file) and counts as verified. Without it, the entry counts as live-verified only when the
    live list equals the stored one.
    """
    snapshot = await live_tools(entry_spec(settings, entry), entry.meta.launch.startup_timeout_seconds)
    difference = diff_tools(entry.tools, snapshot)
    state = read_state(settings)
    if update:
        write_tools_json(home_tools_path(settings, entry.id), snapshot)
        state.verified[entry.id] = snapshot.sha256
    elif entry.tools is not None and entry.tools.sha256 == snapshot.sha256:
        state.verified[entry.id] = snapshot.sha256
    else:
        state.verified.pop(entry.id, None)
    write_state(settings, state)
    return snapshot, difference
