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
from hanzo_hub.catalog.loader import load_catalog
from hanzo_hub.config import HubSettings, SandboxSettings, ServerPolicySpec
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import FAST_BACKENDS, REPO

HOME = REPO / ".cache" / "catalog-home"
"""Where the live tests keep the servers' environments (stamped, so a rerun does not reinstall)."""
SANDBOX = SandboxSettings(keyring_service=None)


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
    policy: dict[str, Any] | None = None,
    call_timeout: float = 30.0,
    tools: Sequence[str] | None = None,
) -> Outcome:
    """Install ``server``, enable it from the catalog as a user does, check its tools against the snapshot and make
    ``calls``.

    The server runs in its manifest's sandbox (bubblewrap unless the manifest says otherwise) under its per-call
    policy, with ``project`` (default ``tmp``) as the project root. The test's service addresses go in as a user's
    ``catalog.overrides`` entry: ``args`` replaces the manifest's launch arguments (after the first ``keep_args`` of
    them), ``extra_args`` are appended, ``env`` is merged over the manifest's environment. ``policy`` is the user's
    ``sandbox.servers[server]`` entry (e.g. granting a browser the test's loopback site). ``tools`` names the tools
    a server without a ``tools.json`` must list (a dynamic one, whose tools come from the test's configuration).
    """
    settings = HubSettings(home=HOME, catalog={"enabled": [server], "project": project or tmp})
    entry = load_catalog(settings).entries[server]
    await install(settings, entry)
    assert is_installed(settings, entry)
    override: dict[str, Any] = {"env": {k: _literal(v) for k, v in (env or {}).items()}}
    override["extra_args"] = [_literal(a) for a in extra_args]
    if args is not None:
        override["args"] = [*entry.meta.launch.args[:keep_args], *(_literal(a) for a in args)]
    backends = {**FAST_BACKENDS, "connect_timeout": entry.meta.launch.startup_timeout_seconds}
    backends["call_timeout"] = call_timeout
    catalog = {"enabled": [server], "project": project or tmp, "overrides": {server: override}}
    sandbox = SANDBOX.model_copy(
        update={"servers": {server: ServerPolicySpec.model_validate(policy)}} if policy else {}
    )
    hub_settings = HubSettings(home=HOME, catalog=catalog, backends=backends, sandbox=sandbox)
    assert server not in hub_settings.servers, "a live test must not hand-configure its server"
    async with Hub.open(hub_settings) as hub, Client(build_server(hub)) as client:
        launch = hub.launches.get(server)
        assert launch is not None, f"{server} is not launched through the sandbox layer"
        assert launch.kind == (entry.meta.sandbox.backend or hub_settings.sandbox.backend)
        outcome = Outcome(tools=list((await client.list_tools()).tools))
        for call in calls:
            outcome.results.append(await client.call_tool(call.tool, call.arguments))
    if entry.tools is None:
        assert tools is not None, f"{server} has no tools.json: name the tools it must list"
        assert sorted(t.name for t in outcome.tools) == sorted(tools), "live tools differ from the expected ones"
    else:
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


def _literal(value: str) -> str:
    """``value`` as a launch template that fills to itself (braces doubled)."""
    return value.replace("{", "{{").replace("}", "}}")


def text(result: types.CallToolResult) -> str:
    """The text blocks of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
