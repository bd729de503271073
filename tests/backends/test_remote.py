"""Remote downstreams: real fixture servers over streamable HTTP and legacy SSE, in their own processes."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest
from mcp import Client

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
