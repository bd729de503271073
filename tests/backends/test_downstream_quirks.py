"""Downstreams the conformance suite's client mode showed the hub mishandling: a version-pinned stateless-era server,
results without ``resultType``, and a malformed optional list. Each used to leave the server unusable."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from mcp import Client

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import FIXTURE, REPO, MakeSettings, text_of

MODERN = "2026-07-28"
TOOL = {"name": "greet", "description": "Say hello.", "inputSchema": {"type": "object", "properties": {}}}
LISTED = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}


class _Quirky(BaseHTTPRequestHandler):
    """A stateless-era server over plain JSON that omits ``resultType`` on ``tools/call`` (clients MUST read that
    as "complete") and answers ``resources/templates/list`` with ``{}``, as the suite's mock servers do."""

    seen: ClassVar[list[str]] = []
    tools: ClassVar[list[Any]] = [TOOL]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method = body.get("method")
        self.seen.append(method)
        results: dict[str, Any] = {
            "server/discover": {
                **LISTED,
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "quirky", "version": "1.0"},
            },
            "tools/list": {**LISTED, "tools": self.tools},
            "resources/list": {**LISTED, "resources": []},
            "resources/templates/list": {},
            "tools/call": {"content": [{"type": "text", "text": "hello"}]},
        }
        if method not in results:
            self._send(404, {"jsonrpc": "2.0", "id": body.get("id"), "error": {"code": -32601, "message": method}})
            return
        self._send(200, {"jsonrpc": "2.0", "id": body["id"], "result": results[method]})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def quirky_url() -> Iterator[str]:
    _Quirky.seen = []
    _Quirky.tools = [TOOL]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Quirky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("protocol", ["auto", MODERN])
async def test_a_quirky_stateless_server_is_served(make_settings: MakeSettings, quirky_url: str, protocol: str) -> None:
    settings = make_settings({"quirky": {"type": "http", "url": quirky_url, "protocol": protocol}})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="auto") as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("greet", {})
    assert tools == ["greet"]  # the malformed template list did not fail the server's start
    assert not result.is_error
    assert text_of(result) == "hello"  # the result without resultType was taken as complete
    assert _Quirky.seen[0] == "server/discover"  # a pinned version still learns the server's capabilities


@pytest.mark.parametrize("kind", ["inproc", "stdio"])
async def test_a_version_pinned_downstream_lists_its_tools(make_settings: MakeSettings, kind: str) -> None:
    if kind == "inproc":
        entry: dict[str, Any] = {"target": f"{FIXTURE}:build"}
    else:
        entry = {"command": sys.executable, "args": ["-m", FIXTURE], "cwd": str(REPO)}
    settings = make_settings({"fixture": {**entry, "protocol": MODERN}})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        added = await client.call_tool("add", {"a": 2, "b": 40})
        running = hub.pool.get("fixture").client
        assert running is not None
        assert running.protocol_version == MODERN
    assert {"echo", "add"} <= names
    assert added.structured_content == {"result": 42}


async def test_a_stateless_server_with_a_malformed_tool_keeps_its_sound_tools(
    make_settings: MakeSettings, quirky_url: str
) -> None:
    """The 2026-07-28 leg of ``test_malformed_lists.py``: one unreadable schema no longer fails the server's start."""
    _Quirky.tools = [TOOL, {"name": "loose", "inputSchema": {}}, {"name": "bad", "inputSchema": {"required": 1}}]
    settings = make_settings({"quirky": {"type": "http", "url": quirky_url}})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="auto") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("greet", {})
    assert set(tools) == {"greet", "loose"}
    assert tools["loose"].input_schema == {"type": "object"}
    assert text_of(result) == "hello"
