"""Shared steps of the catalog's live tests: install a server into ``.cache/catalog-home``, start it through the
hub, compare its live tools with the manifest's snapshot (hidden tools excluded) and make real calls.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client

from hanzo_hub.catalog.envs import install, is_installed
from hanzo_hub.catalog.loader import catalog_specs, load_catalog
from hanzo_hub.config import HubSettings, StdioServerSpec
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import FAST_BACKENDS, REPO

HOME = REPO / ".cache" / "catalog-home"
"""Where the live tests keep the servers' environments (stamped, so a rerun does not reinstall)."""


@dataclass(frozen=True)
class Call:
    """One tool call and the text its result must contain."""

    tool: str
    arguments: dict[str, Any]
    expect: str
    error: bool = False
    """The call must fail (``isError``), e.g. a plain-text failure the manifest's ``errorPatterns`` catch."""


@dataclass
class Outcome:
    """What a live run saw: the exposed tools and each call's result."""

    tools: list[types.Tool]
    results: list[types.CallToolResult] = field(default_factory=list)


def git_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A git repository with one commit of ``files``."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"notes.txt": "catalog notes\n"}).items():
        (path / name).write_text(text, encoding="utf-8")
    for cmd in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "initial"],
    ):
        subprocess.run(["git", *cmd], cwd=path, check=True, timeout=30)
    return path


async def run_live(
    server: str,
    tmp: Path,
    calls: Sequence[Call],
    *,
    args: Sequence[str] | None = None,
    keep_args: int = 0,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    project: Path | None = None,
    call_timeout: float = 30.0,
) -> Outcome:
    """Install ``server``, start it through the hub, check its tools against the snapshot and make ``calls``.

    ``args`` replaces the manifest's launch arguments (after the first ``keep_args`` of them), ``extra_args`` are
    appended, ``env`` is merged over
    the manifest's environment (the test's service addresses).
    """
    settings = HubSettings(home=HOME, catalog={"enabled": [server], "project": project or tmp})
    entry = load_catalog(settings).entries[server]
    await install(settings, entry)
    assert is_installed(settings, entry)
    spec = catalog_specs(settings)[server]
    assert isinstance(spec, StdioServerSpec)
    update: dict[str, Any] = {"env": {**spec.env, **(env or {})}}
    if args is not None or extra_args:
        update["args"] = (*(spec.args if args is None else (*spec.args[:keep_args], *args)), *extra_args)
    spec = spec.model_copy(update=update)
    backends = {**FAST_BACKENDS, "connect_timeout": entry.meta.launch.startup_timeout_seconds}
    backends["call_timeout"] = call_timeout
    hub_settings = HubSettings(home=tmp / "hub", servers={server: spec}, backends=backends)
    async with Hub.open(hub_settings) as hub, Client(build_server(hub)) as client:
        outcome = Outcome(tools=list((await client.list_tools()).tools))
        for call in calls:
            outcome.results.append(await client.call_tool(call.tool, call.arguments))
    assert entry.tools is not None
    hidden = {name for name, fix in entry.meta.tool_overrides.items() if fix.hidden}
    expected = sorted(n for n in entry.tools.names if n not in hidden)
    assert sorted(t.name for t in outcome.tools) == expected, "live tools differ from tools.json"
    by_name = {str(t["name"]): t for t in entry.tools.tools}
    for tool in outcome.tools:
        assert tool.input_schema == by_name[tool.name]["inputSchema"], f"{tool.name}: input schema drifted"
    for call, result in zip(calls, outcome.results, strict=True):
        dumped = json.dumps(result.model_dump(mode="json"), ensure_ascii=False)
        assert result.is_error is call.error, f"{call.tool}: {dumped[:2000]}"
        assert call.expect in dumped, f"{call.tool}: {call.expect!r} not in {dumped[:2000]}"
    return outcome


def text(result: types.CallToolResult) -> str:
    """The text blocks of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
