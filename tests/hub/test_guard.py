"""Per-call policy through the real hub: denials never reach the downstream, results are capped and redacted.

The downstream (``tests.fixtures.policed``) really reads files and really fetches URLs, and records every call it
gets; the SSRF victim is an HTTP server on loopback that counts its hits.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.guard import TURN_KEY
from hanzo_hub.hub.server import build_server
from hanzo_hub.sandbox.vault import Vault
from tests.conftest import MakeSettings, text_of
from tests.fixtures.policed import CALLS

POLICED = {"target": "tests.fixtures.policed:build"}
SECRET = "sk-live-4f9a8b7c6d5e"


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()


class Victim:
    """An HTTP server on 127.0.0.1 that counts requests."""

    def __init__(self) -> None:
        hits = self.hits = [0]

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits[0] += 1
                body = b"internal secrets"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture(scope="module")
def victim() -> Iterator[Victim]:
    v = Victim()
    v.thread.start()
    try:
        yield v
    finally:
        v.server.shutdown()
        v.thread.join(5)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "notes.txt").write_text("project notes", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET", encoding="utf-8")
    (proj / "link").symlink_to(outside)
    return proj.resolve()


def settings_with(make_settings: MakeSettings, project: Path, **sandbox: Any) -> HubSettings:
    """Two copies of the recording server: ``policed`` (with a policy) and ``plain`` (configured without one)."""
    body = {
        "roots": {"*": [str(project)]},
        "keyring_service": None,
        "servers": {"policed": {"category": "web", "defaults": {"rate_per_minute": 600, "burst": 100}}},
    }
    for key, value in sandbox.items():
        body[key] = {**body.get(key, {}), **value} if isinstance(value, dict) else value  # type: ignore[dict-item]
    return make_settings({"policed": POLICED, "plain": POLICED}, sandbox=body)


@asynccontextmanager
async def hub_client(settings: HubSettings, mode: str) -> AsyncIterator[Client]:
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        yield client


def denied(result: types.CallToolResult, limit: str) -> bool:
    return bool(result.is_error) and "policy denied" in text_of(result) and f"({limit})" in text_of(result)


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "link/secret.txt",
        "/etc/passwd",
        "\uff0e\uff0e/outside/secret.txt",
        "%2e%2e/outside/secret.txt",
        "..\\outside\\secret.txt",
        "~/.bashrc",
        "notes.txt\x00../../outside/secret.txt",
        "file:///etc/passwd",
    ],
    ids=["dotdot", "symlink-out", "absolute", "fullwidth-dots", "percent", "backslashes", "home", "nul", "file-url"],
)
async def test_path_escapes_are_denied_and_never_reach_the_downstream(
    make_settings: MakeSettings, project: Path, mode: str, path: str
) -> None:
    settings = settings_with(make_settings, project)
    async with hub_client(settings, mode) as client:
        result = await client.call_tool("policed__read_file", {"path": path})
        absolute_out = await client.call_tool(
            "policed__read_file", {"path": str(project.parent / "outside/secret.txt")}
        )
    assert denied(result, "path"), text_of(result)
    assert denied(absolute_out, "path")
    assert "TOP SECRET" not in text_of(result)
    assert CALLS == []


async def test_paths_inside_the_root_work_and_relative_ones_are_made_absolute(
    make_settings: MakeSettings, project: Path, mode: str
) -> None:
    settings = settings_with(make_settings, project)
    async with hub_client(settings, mode) as client:
        relative = await client.call_tool("policed__read_file", {"path": "notes.txt"})
        absolute = await client.call_tool("policed__read_file", {"path": str(project / "notes.txt")})
    assert text_of(relative) == text_of(absolute) == "project notes"
    # the hub's cwd is not the project: the downstream got the path the policy checked
    assert CALLS[0] == ("read_file", {"path": str(project / "notes.txt")})


async def test_a_server_configured_without_policy_keeps_working_unchecked(
    make_settings: MakeSettings, project: Path
) -> None:
    settings = settings_with(make_settings, project)
    async with hub_client(settings, "legacy") as client:
        result = await client.call_tool("plain__read_file", {"path": str(project.parent / "outside/secret.txt")})
    assert not result.is_error
    assert text_of(result) == "TOP SECRET"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/",
        "http://localhost:{port}/",
        "http://[::1]:{port}/",
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706433:{port}/",
        "http://[::ffff:127.0.0.1]:{port}/",
        "ftp://127.0.0.1:{port}/",
    ],
    ids=["ipv4-loopback", "dns-localhost", "ipv6-loopback", "metadata", "decimal-ip", "ipv4-mapped", "scheme"],
)
async def test_ssrf_targets_are_denied_and_the_victim_sees_nothing(
    make_settings: MakeSettings, project: Path, victim: Victim, url: str
) -> None:
    settings = settings_with(make_settings, project)
    before = victim.hits[0]
    async with hub_client(settings, "auto") as client:
        result = await client.call_tool("policed__fetch", {"url": url.format(port=victim.port)})
    assert denied(result, "url"), text_of(result)
    assert "internal secrets" not in text_of(result)
    assert CALLS == []
    assert victim.hits[0] == before


async def test_a_private_network_grant_lets_the_same_fetch_through(
    make_settings: MakeSettings, project: Path, victim: Victim
) -> None:
    grant = {"policed": {"category": "web", "defaults": {"allow_private_network": True}}}
    settings = settings_with(make_settings, project, servers=grant)
    before = victim.hits[0]
    async with hub_client(settings, "legacy") as client:
        result = await client.call_tool("policed__fetch", {"url": f"http://127.0.0.1:{victim.port}/"})
    assert text_of(result) == "internal secrets", text_of(result)
    assert victim.hits[0] == before + 1  # the check above is what stopped the others, not a broken fetch


async def test_oversized_results_are_truncated_with_a_notice(
    make_settings: MakeSettings, project: Path, mode: str
) -> None:
    limits = {"policed": {"category": "web", "defaults": {"max_result_bytes": 1000}}}
    settings = settings_with(make_settings, project, servers=limits)
    async with hub_client(settings, mode) as client:
        small = await client.call_tool("policed__big", {"size": 900})
        large = await client.call_tool("policed__big", {"size": 50_000})
        plain = await client.call_tool("plain__big", {"size": 50_000})
    assert text_of(small) == "x" * 900
    texts = [getattr(block, "text", "") for block in large.content]
    assert texts[0] == "x" * 1000
    assert "truncated by policy" in texts[-1]
    # the 50 kB structured copy was dropped, not passed around the cap; without it the result cannot match the
    # tool's output schema, so it is flagged as an error (clients validate only successful results)
    assert large.structured_content is None
    assert large.is_error
    assert small.structured_content == {"result": "x" * 900}
    assert not small.is_error
    assert text_of(plain) == "x" * 50_000  # the default cap (1 MB) of a server without policy


async def test_rate_limit_is_enforced_then_recovers(make_settings: MakeSettings, project: Path) -> None:
    rate = {"policed": {"category": "web", "defaults": {"rate_per_minute": 120, "burst": 2}}}
    settings = settings_with(make_settings, project, servers=rate)
    async with hub_client(settings, "legacy") as client:
        first = [await client.call_tool("policed__echo", {"text": str(i)}) for i in range(2)]
        limited = await client.call_tool("policed__echo", {"text": "over"})
        other_tool = await client.call_tool("policed__big", {"size": 1})
        await anyio.sleep(0.6)  # 120 per minute: one token every 0.5 s
        recovered = await client.call_tool("policed__echo", {"text": "again"})
    assert all(not r.is_error for r in first)
    assert denied(limited, "rate"), text_of(limited)
    assert not other_tool.is_error  # buckets are per (user, server, tool)
    assert text_of(recovered) == "again"
    assert [c[1].get("text") for c in CALLS if c[0] == "echo"] == ["0", "1", "again"]


async def test_per_turn_budget(make_settings: MakeSettings, project: Path, mode: str) -> None:
    settings = settings_with(make_settings, project, calls_per_turn=3)
    async with hub_client(settings, mode) as client:
        turn1 = [await client.call_tool("plain__echo", {"text": "a"}, meta={TURN_KEY: "t1"}) for _ in range(3)]
        fourth = await client.call_tool("policed__echo", {"text": "b"}, meta={TURN_KEY: "t1"})
        turn2 = await client.call_tool("policed__echo", {"text": "c"}, meta={TURN_KEY: "t2"})
    assert all(not r.is_error for r in turn1)
    assert denied(fourth, "turn_budget"), text_of(fourth)
    assert "3 tool calls per turn" in text_of(fourth)
    assert not turn2.is_error
    assert [c[1]["text"] for c in CALLS] == ["a", "a", "a", "c"]


async def test_per_session_budget_counts_policed_calls(make_settings: MakeSettings, project: Path) -> None:
    settings = settings_with(make_settings, project, calls_per_session=2)
    async with hub_client(settings, "legacy") as client:
        for _ in range(2):
            assert not (await client.call_tool("policed__echo", {"text": "x"})).is_error
        over = await client.call_tool("policed__echo", {"text": "x"})
        plain = await client.call_tool("plain__echo", {"text": "y"})
    assert denied(over, "session_budget")
    assert not plain.is_error
    async with hub_client(settings, "legacy") as client:  # a new session starts afresh
        assert not (await client.call_tool("policed__echo", {"text": "z"})).is_error


async def test_per_call_timeout(make_settings: MakeSettings, project: Path, mode: str) -> None:
    quick = {"policed": {"category": "web", "tools": {"sleep": {"timeout": 0.3}}}}
    settings = settings_with(make_settings, project, servers=quick)
    async with hub_client(settings, mode) as client:
        with anyio.fail_after(5):
            slow = await client.call_tool("policed__sleep", {"seconds": 5})
        after = await client.call_tool("policed__echo", {"text": "still here"})
    assert slow.is_error
    assert "timed out after 0.3 s" in text_of(slow)
    assert text_of(after) == "still here"


async def test_disabled_tool_and_audit_file(make_settings: MakeSettings, project: Path) -> None:
    off = {"policed": {"category": "web", "tools": {"echo": {"enabled": False}}}}
    settings = settings_with(make_settings, project, servers=off)
    async with hub_client(settings, "legacy") as client:
        refused = await client.call_tool("policed__echo", {"text": "classified-argument-value"})
        allowed = await client.call_tool("policed__big", {"size": 3})
    assert denied(refused, "disabled")
    assert not allowed.is_error
    lines = (settings.log_dir / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["server"], r["tool"], r["verdict"], r["limit"]) for r in records] == [
        ("policed", "echo", "deny", "disabled"),
        ("policed", "big", "allow", None),
    ]
    assert records[0]["arguments"] == ["text"]
    assert records[0]["user"] == settings.user
    assert "classified-argument-value" not in "\n".join(lines)


async def test_vault_secrets_are_redacted_from_results_and_the_audit_file(
    make_settings: MakeSettings, project: Path, mode: str
) -> None:
    settings = settings_with(make_settings, project)
    Vault(settings.vault_dir, keyring_service=None).set("API_TOKEN", SECRET)
    async with hub_client(settings, mode) as client:
        result = await client.call_tool("plain__echo", {"text": f"the token is {SECRET}!"})
    assert text_of(result) == "the token is [redacted:API_TOKEN]!"
    assert SECRET not in json.dumps(result.model_dump(mode="json"))
    assert SECRET not in (settings.log_dir / "audit.jsonl").read_text(encoding="utf-8")
    assert os.stat(settings.vault_dir / "vault.key").st_mode & 0o077 == 0
