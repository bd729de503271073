"""Remote downstreams: real fixture servers over streamable HTTP and legacy SSE, in their own processes."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, free_port, listening_process, text_of

pytestmark = pytest.mark.integration


def _serve(kind: str) -> Iterator[int]:
    port = free_port()
    with listening_process(
        [sys.executable, "-m", "tests.fixtures.downstream", kind, f"remote-{kind}", str(port)], port
    ):
        yield port


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    yield from _serve("http")


@pytest.fixture(scope="module")
def sse_port() -> Iterator[int]:
    yield from _serve("sse")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_remote_servers_over_http_and_sse_are_aggregated(
    make_settings: MakeSettings, http_port: int, sse_port: int, mode: str
) -> None:
    settings = make_settings(
        {
            "web": {"type": "http", "url": f"http://127.0.0.1:{http_port}/mcp", "headers": {"X-Test": "1"}},
            "old": {"type": "sse", "url": f"http://127.0.0.1:{sse_port}/sse"},
        }
    )
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        over_http = await client.call_tool("web__add", {"a": 2, "b": 40})
        over_sse = await client.call_tool("old__echo", {"text": "via sse"})
        doc = await client.read_resource("hub://old/fixture://doc")
    assert {"web__echo", "old__echo", "web__image", "old__image"} <= names
    assert over_http.structured_content == {"result": 42}
    assert text_of(over_sse) == "via sse"
    assert [getattr(c, "text", None) for c in doc.contents] == ["the document"]


async def test_an_unreachable_remote_server_fails_alone(make_settings: MakeSettings, http_port: int) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = int(sock.getsockname()[1])
    settings = make_settings(
        {
            "web": {"type": "http", "url": f"http://127.0.0.1:{http_port}/mcp"},
            "gone": {"type": "http", "url": f"http://127.0.0.1:{closed}/mcp"},
        },
        backends={"connect_timeout": 3.0},
    )
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        still = await client.call_tool("web__echo", {"text": "fine"})
    assert all(name.startswith("web__") for name in names)
    assert text_of(still) == "fine"
    assert hub.pool.get("gone").last_error is not None


def _remotes(http_port: int, sse_port: int) -> dict[str, Any]:
    """The streamable HTTP fixture in both eras (answers as server-sent events, and as JSON bodies) and legacy SSE."""
    url = f"http://127.0.0.1:{http_port}/mcp"
    return {
        "events": {"type": "http", "url": url, "protocol": "legacy"},
        "bodies": {"type": "http", "url": url, "protocol": "auto"},
        "old": {"type": "sse", "url": f"http://127.0.0.1:{sse_port}/sse"},
    }


async def _answer(client: Client, tool: str, text: str) -> tuple[bool, str]:
    """Whether the call failed, and its text or error message."""
    try:
        result = await client.call_tool(tool, {"text": text})
    except MCPError as exc:
        return True, exc.error.message
    return bool(result.is_error), text_of(result)


async def test_answers_over_a_mebibyte_come_through_every_remote_transport(
    make_settings: MakeSettings, http_port: int, sse_port: int
) -> None:
    # The SDK caps one server-sent event at 1 MiB by default: a 2 MB tool result used to fail as a lost connection.
    servers = _remotes(http_port, sse_port)
    roomy = {"sandbox": "none", "defaults": {"max_result_bytes": 8_000_000}}
    sandbox = {"keyring_service": None, "servers": dict.fromkeys(servers, roomy)}
    settings = make_settings(servers, sandbox=sandbox)
    big = "x" * 2_000_000
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        answers = {name: await _answer(client, f"{name}__echo", big) for name in servers}
    assert answers == dict.fromkeys(servers, (False, big))
    assert all(hub.pool.get(name).starts == 1 for name in servers)


async def test_an_answer_over_the_message_cap_fails_alone_and_the_server_keeps_serving(
    make_settings: MakeSettings, http_port: int, sse_port: int
) -> None:
    servers = _remotes(http_port, sse_port)
    settings = make_settings(servers, backends={"max_message_bytes": 256 * 1024})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        over = {name: await _answer(client, f"{name}__echo", "x" * 400_000) for name in servers}
        after = {name: await _answer(client, f"{name}__echo", "small") for name in servers}
        starts = {name: hub.pool.get(name).starts for name in servers}
    assert all(failed for failed, _ in over.values())
    # An event stream of its own, or a JSON body: the one answer fails with the reason, the connection stays.
    assert "broke off its answer" in over["events"][1]
    assert "exceeded the 262144 byte limit" in over["events"][1]
    assert "server 'bodies' answered with more than 262144 bytes (backends.max_message_bytes)" in over["bodies"][1]
    assert starts["events"] == starts["bodies"] == 1
    # Legacy SSE carries every answer on one stream, which an oversized event ends: the server is connected again.
    assert "server 'old'" in over["old"][1]
    assert starts["old"] == 2
    assert after == dict.fromkeys(servers, (False, "small"))


@pytest.fixture(scope="module")
def refusing_port() -> Iterator[int]:
    yield from _serve("sse-refusing")


async def _outcome(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """(failed, text) of a call: an error result, or the downstream's JSON-RPC error relayed as one."""
    try:
        result = await client.call_tool(tool, arguments)
    except MCPError as exc:
        return True, exc.error.message
    return bool(result.is_error), text_of(result)


async def test_a_legacy_sse_server_refusing_one_post_fails_that_call_alone(
    make_settings: MakeSettings, refusing_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK's legacy SSE client stops posting after one refused post; the hub answers the refused request with
    its error and the connection goes on. A 404 (the server forgot the session) ends it, and the next call
    connects again."""
    settings = make_settings({"old": {"type": "sse", "url": f"http://127.0.0.1:{refusing_port}/sse"}})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        with anyio.fail_after(20):  # a request left unanswered would wait out the 60 s call timeout
            assert "echo" in {tool.name for tool in (await client.list_tools()).tools}  # one server: no prefix
            caplog.clear()
            refused = await _outcome(client, "echo", {"text": "refuse-me"})
            too_big = await _outcome(client, "echo", {"text": "too-big"})
            fine = await _outcome(client, "echo", {"text": "fine"})
            with anyio.move_on_after(1):  # cancelled: the server refuses the cancellation notice
                await client.call_tool("sleep", {"seconds": 5})
            still = await _outcome(client, "add", {"a": 1, "b": 2})
            starts = hub.pool.get("old").starts
            forgotten = await _outcome(client, "echo", {"text": "forget-me"})
            back = await _outcome(client, "echo", {"text": "back"})
            restarts = hub.pool.get("old").starts
    assert refused[0]
    assert "server 'old' answered HTTP 500: refused with 500" in refused[1]
    assert too_big[0]
    assert "server 'old' answered HTTP 413" in too_big[1]
    assert fine == (False, "fine")
    assert still == (False, "3")
    assert starts == 1
    assert "server old refused a message (HTTP 500); it expects no answer" in caplog.text
    assert forgotten[0]
    assert "refused a request with HTTP 404" in forgotten[1]
    assert back == (False, "back")
    assert restarts == 2
