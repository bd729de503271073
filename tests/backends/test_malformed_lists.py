"""Servers whose lists break the protocol in places: the hub serves what is sound, repairs what has a plain intent,
drops the rest with a warning, and never lets one bad item fail a server's start or the hub's own lists.

A real subprocess server written as raw JSON-RPC (``tests/fixtures/malformed.py``), beside a healthy fixture server;
a hand-written snapshot holding the same items; real MCP clients of both eras in front.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError

from hanzo_hub.backends.lenient import Problems, checked
from hanzo_hub.backends.snapshot import FORMAT_VERSION, SnapshotStore
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from hanzo_hub.hub.status import STATUS_URI
from tests.conftest import REPO, MakeSettings, free_port, listening_process, stdio, text_of
from tests.fixtures import malformed

MALFORMED = {"command": sys.executable, "args": ["-m", "tests.fixtures.malformed"], "cwd": str(REPO)}
SOUND = {"bad__greet", "bad__loose", "bad__php", "bad__shaped"}


def tools_by_name(tools: list[types.Tool]) -> dict[str, types.Tool]:
    return {tool.name: tool for tool in tools if tool.name.startswith("bad__")}


def assert_sound(tools: dict[str, types.Tool]) -> None:
    assert set(tools) == SOUND  # `hopeless` and the item that is not a tool are dropped
    assert tools["bad__loose"].input_schema == {"type": "object", "properties": {"x": {}}}
    assert tools["bad__php"].input_schema == {"type": "object", "properties": {}}
    assert tools["bad__shaped"].output_schema is None  # an array output schema is removed, the tool kept
    assert tools["bad__greet"].description == "Say hello."  # the first of two tools named greet


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_server_with_malformed_list_items_is_served_and_the_rest_of_the_hub_too(
    make_settings: MakeSettings, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings({"alpha": stdio("ok", "alpha"), "bad": MALFORMED})
    caplog.set_level(logging.WARNING, logger="hanzo_hub.backends.lenient")
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        tools = (await client.list_tools()).tools
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        loose = await client.call_tool("bad__loose", {"x": 1})
        echoed = await client.call_tool("alpha__echo", {"text": "still here"})
        status = await client.read_resource(STATUS_URI)
    assert_sound(tools_by_name(tools))
    assert "alpha__echo" in {tool.name for tool in tools}
    assert "hub://bad/fixture://good" in resources
    assert "hub://bad/fixture://nameless" not in resources
    assert "bad__fine" in prompts
    assert "bad__odd" not in prompts
    assert text_of(loose) == 'loose {"x": 1}'
    assert text_of(echoed) == "still here"
    (content,) = status.contents
    assert isinstance(content, types.TextResourceContents)
    servers = json.loads(content.text)["servers"]
    assert servers["alpha"]["list_problems"] == []
    problems = servers["bad"]["list_problems"]
    assert len(problems) == 8  # 3 tools repaired, 2 dropped, 1 duplicate, 1 resource, 1 prompt
    assert any(p.startswith("tool 'hopeless' dropped, it breaks the protocol (inputSchema.required") for p in problems)
    warnings = [r.getMessage() for r in caplog.records]
    assert any("server bad: tool 'hopeless' dropped" in w and "inputSchema.required" in w for w in warnings)
    assert any("server bad: tool 'loose' repaired" in w for w in warnings)
    assert any("server bad: resource 'fixture://nameless' dropped" in w for w in warnings)
    assert any("server bad: prompt 'odd' dropped" in w for w in warnings)
    assert any("server bad: a second tool 'greet' dropped" in w for w in warnings)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_snapshot_with_malformed_items_does_not_break_the_hubs_lists(
    make_settings: MakeSettings, mode: str
) -> None:
    """A snapshot written before the hub checked items (or edited by hand) is checked as it is loaded."""
    down = {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]}  # it never replaces the snapshot
    settings = make_settings({"alpha": stdio("ok", "alpha"), "bad": down})
    store = SnapshotStore(settings.snapshot_dir)
    listing = {"tools": malformed.TOOLS, "resources": [], "resourceTemplates": [], "prompts": []}
    body = {"format": FORMAT_VERSION, "server": "bad", "taken_at": time.time(), "listing": listing}
    store.path_for("bad").parent.mkdir(parents=True, exist_ok=True)
    store.path_for("bad").write_text(json.dumps(body), encoding="utf-8")
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        tools = (await client.list_tools()).tools
    assert_sound(tools_by_name(tools))
    assert "alpha__echo" in {tool.name for tool in tools}


def test_checked_keeps_the_very_same_items_when_all_are_sound() -> None:
    tools = [types.Tool(name=f"t{i}", input_schema={"type": "object"}) for i in range(3)]
    kept = checked("tools/list", tools, Problems("s"))
    assert all(a is b for a, b in zip(kept, tools, strict=True))


def test_checked_repairs_or_drops_in_order() -> None:
    raw: list[dict[str, Any]] = [t for t in malformed.TOOLS if isinstance(t, dict)]
    tools = [types.Tool.model_validate(t) for t in raw]
    kept = checked("tools/list", tools, Problems("s"))
    assert [tool.name for tool in kept] == ["greet", "loose", "php", "shaped"]
    assert kept[0].description == "Say hello."


def test_the_doctors_probe_warns_of_a_server_whose_lists_break_the_protocol(make_settings: MakeSettings) -> None:
    from tests.test_cli_doctor import doctor

    settings = make_settings({"bad": MALFORMED, "alpha": stdio("ok", "alpha")})
    code, checks, _ = doctor(settings, "--probe", "--timeout", "30")
    assert code == 0  # a warning, not a failure: the server is served
    assert checks["probe:alpha"]["status"] == "ok"
    bad = checks["probe:bad"]
    assert bad["status"] == "warn"
    assert bad["detail"].startswith("4 tools, 1 resource, 1 prompt live in ")
    assert "list item(s) break the protocol: tool 'loose' repaired" in bad["detail"]


@contextmanager
def malformed_server(transport: str) -> Iterator[dict[str, Any]]:
    """The fixture's spec over ``transport``: a stdio subprocess, or the same server over legacy SSE on loopback."""
    if transport == "stdio":
        yield MALFORMED
        return
    port = free_port()
    with listening_process([sys.executable, "-m", "tests.fixtures.malformed", "--sse", str(port)], port):
        yield {"type": "sse", "url": f"http://127.0.0.1:{port}/sse"}


@pytest.mark.parametrize("transport", ["stdio", "sse"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("path", ["fast", "typed"])
async def test_a_malformed_call_result_is_an_error_naming_the_server_and_the_rest_goes_on(
    make_settings: MakeSettings, mode: str, path: str, transport: str
) -> None:
    """On the fast path the downstream's bytes are relayed; a server with ``error_patterns`` takes the typed path (the
    hub reads its results). Either way the client gets at once an error saying what is wrong, never a result its SDK
    cannot read nor a timeout (10 s here), and the server goes on serving on the same connection. An answer that is
    no valid JSON-RPC at all (a result that is no object, text cut off) reaches the hub as an exception on the
    transport's read stream; over legacy SSE that used to leave the call waiting out its timeout."""
    answers: dict[str, tuple[bool, str]] = {}
    slowest = 0.0
    with malformed_server(transport) as server:
        spec = server if path == "fast" else {**server, "error_patterns": ["^never$"]}
        settings = make_settings({"bad": spec}, exposure={"prefix": True})
        async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
            await client.list_tools()
            for name in [*malformed.BROKEN_RESULTS, malformed.TRUNCATED]:
                began = time.monotonic()
                try:
                    result = await client.call_tool("bad__greet", {"answer": name})
                except MCPError as exc:  # the typed path relays a downstream's protocol error as one
                    answers[name] = (True, exc.error.message)
                else:
                    answers[name] = (bool(result.is_error), text_of(result))
                slowest = max(slowest, time.monotonic() - began)
            after = await client.call_tool("bad__greet", {"who": "x"})
            starts = hub.pool.get("bad").starts
    if path == "typed":  # the SDK's model reads "yes" as true (pydantic's lax booleans): the client gets `true`
        assert answers.pop("error-flag-not-a-bool") == (True, "x")
    for name, (failed, text) in answers.items():
        assert failed, (name, text)
        assert text.startswith("server 'bad' answered with an invalid "), (name, text)
    textless = answers["textless"][1]
    assert (
        "content[0] (text) has no string 'text'" if path == "fast" else "content.0.TextContent.text: Field required"
    ) in textless
    assert answers["not-an-object"][1].endswith("result is not an object")
    assert answers[malformed.TRUNCATED][1].endswith("invalid message: it is not valid JSON")
    assert slowest < 5.0
    assert starts == 1  # one connection served every call
    assert not after.is_error
    assert text_of(after) == 'greet {"who": "x"}'
