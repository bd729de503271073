"""The hub's status resource and find_tools' unavailable-server notes, through real MCP clients, with real
subprocess servers: one healthy, one that exits at start (its stderr carries a vault secret)."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.search import selection_result
from hanzo_hub.hub.server import build_server
from hanzo_hub.hub.status import STATUS_URI, WATCH_INTERVAL
from hanzo_hub.sandbox.vault import Vault
from hanzo_hub.selection.pipeline import Candidate, Selection
from tests.backends.test_oauth import oauth_server, remote
from tests.conftest import MakeSettings, ResourceUpdates, inproc, stdio, text_of

SECRET = "sk-status-0123456789abcdef"
DOWN_TOOL = types.Tool(
    name="fetch_report", description="Fetch the quarterly sales report.", input_schema={"type": "object"}
)
CRASH = (
    f"import sys; print('fatal: login refused for token {SECRET}', file=sys.stderr, flush=True); raise SystemExit(1)"
)


def settings_for(make_settings: MakeSettings, **extra: Any) -> HubSettings:
    servers = {"alpha": stdio("ok", "alpha"), "down": {"command": sys.executable, "args": ["-c", CRASH]}}
    settings = make_settings(servers, backends={"breaker_threshold": 2, "breaker_cooldown": 600}, **extra)
    SnapshotStore(settings.snapshot_dir).save("down", Listing(tools=(DOWN_TOOL,)))
    Vault(settings.vault_dir, keyring_service=None).set("DOWN_TOKEN", SECRET)
    return settings


async def read_status(client: Client) -> dict[str, Any]:
    result = await client.read_resource(STATUS_URI)
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.mime_type == "application/json"
    report: dict[str, Any] = json.loads(content.text)
    return report


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_status_resource_says_which_servers_run_and_why_one_fails(
    make_settings: MakeSettings, mode: str
) -> None:
    settings = settings_for(make_settings)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        before = await read_status(client)
        ok = await client.call_tool("alpha__echo", {"text": "hi"})
        failed = [await client.call_tool("down__fetch_report", {}) for _ in range(2)]
        after = await read_status(client)

    assert STATUS_URI in listed
    assert text_of(ok) == "hi"
    assert all(result.is_error for result in failed)
    assert before["servers"]["down"]["health"] == "ok"  # not started yet: servers start on first use
    assert before["servers"]["down"]["state"] == "stopped"
    alpha, down = after["servers"]["alpha"], after["servers"]["down"]
    assert (alpha["state"], alpha["health"], alpha["reason"], alpha["transport"]) == ("running", "ok", None, "stdio")
    assert alpha["exposed"]["tools"] == len(hub.registry.listings["alpha"].tools) > 0
    assert alpha["listed_from"] == "live"
    assert alpha["server_info"]["name"] == "alpha"
    assert down["health"] == "unavailable"
    assert down["circuit_open"] is True
    assert down["failures"] == 2
    assert down["retry_in_s"] > 500
    assert down["exposed"]["tools"] == 1
    assert down["listed_from"] == "snapshot"
    assert "2 failed start(s)" in down["reason"]
    assert "login refused" in down["last_error"]
    assert after["hub"]["servers"] == len(after["servers"])
    assert after["hub"]["unavailable"] == 1
    assert after["hub"]["running"] >= 1
    assert SECRET not in json.dumps(after)
    assert "[redacted:DOWN_TOKEN]" in down["last_error"]


async def test_find_tools_notes_a_chosen_tool_whose_server_cannot_answer(make_settings: MakeSettings) -> None:
    settings = settings_for(make_settings, exposure={"mode": "search", "embedder": "fake"})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        first = await client.call_tool("find_tools", {"query": "fetch the quarterly sales report"})
        for _ in range(2):
            await client.call_tool("call_tool", {"name": "down__fetch_report", "arguments": {}})
        second = await client.call_tool("find_tools", {"query": "fetch the quarterly sales report"})

    assert first.structured_content is not None
    assert second.structured_content is not None
    assert "down__fetch_report" in [tool["name"] for tool in second.structured_content["tools"]]
    assert first.structured_content["unavailable"] == {}
    note = second.structured_content["unavailable"]["down__fetch_report"]
    assert note.startswith("unavailable after 2 failed start(s)")
    assert SECRET not in json.dumps(second.structured_content)
    assert SECRET not in text_of(second)
    assert "down__fetch_report: Fetch the quarterly sales report. [server unavailable after" in text_of(second)
    assert not any(name.startswith("alpha") for name in second.structured_content["unavailable"])


async def test_a_server_that_needs_a_login_is_reported_with_the_way_to_log_in(make_settings: MakeSettings) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin), "local": inproc("alpha")})
        async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
            await client.list_tools()  # discovery meets the server's 401: the hub holds no login for it
            report = await read_status(client)
    entry = report["servers"]["remote"]
    assert (entry["health"], entry["transport"], entry["needs_login"]) == ("needs_login", "http", True)
    assert entry["reason"] == "needs an OAuth login: call remote__login, or run `hanzo-hub auth login remote`"
    assert "HTTP 401" in entry["last_error"]
    assert report["hub"]["needs_login"] == 1
    assert report["servers"]["local"]["health"] == "ok"


@pytest.mark.parametrize("description", [None, "", "   \n  "])
def test_find_tools_answers_for_tools_without_a_description(description: str | None) -> None:
    tool = types.Tool(name="bare", description=description, input_schema={"type": "object"})
    candidate = Candidate(id="bare", score=0.5, tokens=10, tool={"name": "bare"})
    selection = Selection("q", [candidate], 10, 10, [candidate], "skipped", "")
    result = selection_result(selection, [tool], {"bare": "failing after 1 failed start(s)"})
    assert text_of(result) == "bare:  [server failing after 1 failed start(s)]"
    assert result.structured_content is not None
    assert result.structured_content["unavailable"] == {"bare": "failing after 1 failed start(s)"}


async def test_a_subscribed_client_hears_when_a_server_fails_both_eras(make_settings: MakeSettings) -> None:
    """resources/subscribe (2025-11-25) and subscriptions/listen (2026-07-28) on the status resource: a server
    failing is news to both; with nobody subscribed, nothing is sent."""
    from mcp import MCPDeprecationWarning
    from mcp.shared.subscriptions import ResourceUpdated

    settings = settings_for(make_settings)
    updates = ResourceUpdates()

    async with (
        Hub.open(settings) as hub,
        Client(build_server(hub), mode="legacy", message_handler=updates) as legacy,
        Client(build_server(hub), mode="auto") as modern,
    ):
        await legacy.call_tool("alpha__echo", {"text": "warm"})  # alpha's start is not what the test waits for
        await anyio.sleep(2 * WATCH_INTERVAL)
        assert updates.uris == []  # nobody was subscribed yet
        with warnings.catch_warnings():  # resources/subscribe is deprecated in 2026-07-28; the hub serves both eras
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await legacy.subscribe_resource(STATUS_URI)
        async with modern.listen(resource_subscriptions=[STATUS_URI]) as subscription:
            await anyio.sleep(2 * WATCH_INTERVAL)
            assert updates.uris == []  # nothing changed: no news
            await legacy.call_tool("down__fetch_report", {})  # the server fails to start
            await updates.wait_for(STATUS_URI, timeout=10)
            with anyio.fail_after(10):
                async for event in subscription:
                    if isinstance(event, ResourceUpdated):
                        break
        assert event.uri == STATUS_URI
        assert updates.uris[0] == STATUS_URI
        assert STATUS_URI in hub.relay.subscribed()  # the legacy client's subscription stays; the stream's is gone
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await legacy.unsubscribe_resource(STATUS_URI)
        assert STATUS_URI not in hub.relay.subscribed()
