"""The ``tools/call`` fast path on the stdio front: ``hanzo-hub serve`` answers eligible calls on its transport.

A real hub process (spawned like a client spawns it) in front of a real handshake-era downstream process. The hub's
debug log says which calls took the transport's fast path; the answers must equal a direct connection's, and the
relay (sampling to this client, cancellation to the server) must keep working through it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import pytest
from anyio.streams.text import TextReceiveStream
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.session import ClientSession

from tests.conftest import FIXTURE, REPO, MakeSettings, hub_command, inproc, stdio, text_of, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CONFORMANCE = REPO / "tests" / "conformance" / "fixture_server.py"
FAST = "fast path on the transport"


def _hub(settings: Any) -> StdioServerParameters:
    argv = hub_command(settings)
    argv[argv.index("--log-level") + 1] = "DEBUG"
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))


def _wire(result: types.CallToolResult) -> dict[str, Any]:
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("_meta", None)
    return body


@pytest.mark.parametrize("loop", ["auto", "asyncio"])
async def test_stdio_fast_path_answers_like_the_server(make_settings: MakeSettings, tmp_path: Path, loop: str) -> None:
    # The default loop is uvloop (a dependency); the standard asyncio loop must serve the same answers.
    settings = make_settings({"ds": stdio("ok", "ds", protocol="legacy"), "other": inproc("beta")}, event_loop=loop)
    direct = StdioServerParameters(command=sys.executable, args=["-m", FIXTURE, "ok", "ds"], cwd=str(REPO))
    log = tmp_path / "hub.log"
    calls = [("echo", {"text": "héllo"}), ("add", {"a": 1, "b": 2}), ("image", {}), ("fail", {"reason": "r"})]
    with log.open("w") as errlog:
        async with (
            stdio_client(_hub(settings), errlog=errlog) as (read, write),
            ClientSession(read, write) as hub,
            Client(direct, mode="legacy") as server,
        ):
            await hub.initialize()
            await hub.call_tool("ds__echo", {"text": "start"})  # starts the downstream (normal path)
            for tool, arguments in calls:
                through = await hub.call_tool(f"ds__{tool}", arguments)
                assert _wire(through) == _wire(await server.call_tool(tool, arguments)), tool
            with pytest.raises(Exception, match="nope"):
                await hub.call_tool("ds__nope", {})
    text = log.read_text()
    assert text.count(FAST) >= len(calls)  # the first call too, when discovery had started the server
    assert f"event loop {'uvloop' if loop == 'auto' else 'asyncio'}" in text


@pytest.mark.parametrize("era", ["legacy", "auto"])  # the downstreams' era: auto reaches 2026-07-28 with them
async def test_sampling_and_cancellation_through_the_stdio_fast_path(
    make_settings: MakeSettings, tmp_path: Path, era: str
) -> None:
    entry = {"command": sys.executable, "args": [str(CONFORMANCE), "--stdio"], "cwd": str(REPO), "protocol": era}
    settings = make_settings({"fx": entry, "ds": stdio("ok", "ds", protocol=era)})
    marker = tmp_path / "cancelled.txt"
    log = tmp_path / "hub.log"

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model"
        )

    with log.open("w") as errlog:
        async with (
            stdio_client(_hub(settings), errlog=errlog) as (read, write),
            ClientSession(read, write, sampling_callback=sampling) as hub,
        ):
            await hub.initialize()
            await hub.call_tool("fx__test_simple_text", {})
            await hub.call_tool("ds__echo", {"text": "start"})
            sampled = await hub.call_tool("fx__test_sampling", {"prompt": "Capital of France?"})
            assert "Paris" in text_of(sampled)
            with anyio.move_on_after(1.0):
                await hub.call_tool("ds__sleep_marked", {"seconds": 30, "marker": str(marker)})
            await wait_until(marker.exists, timeout=10)
            assert marker.read_text() == "cancelled"
            again = await hub.call_tool("ds__echo", {"text": "still fine"})
            assert text_of(again) == "still fine"
    assert log.read_text().count(FAST) >= 3


MODERN = "2026-07-28"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"


class _RawClient:
    """A stateless-era client speaking raw JSON lines to a hub process (to compare the exact wire answers)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._process = process
        self._lines = TextReceiveStream(process.stdout)
        self._pending = ""
        self._ids = iter(range(1, 10_000))
        self.notifications: list[dict[str, Any]] = []

    @staticmethod
    def meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities or {},
            **extra,
        }

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self._ids)
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n"
        assert self._process.stdin is not None
        await self._process.stdin.send(line.encode())
        with anyio.fail_after(30):
            while True:
                while "\n" not in self._pending:
                    self._pending += await self._lines.receive()
                frame, self._pending = self._pending.split("\n", 1)
                message = json.loads(frame)
                if message.get("id") == request_id:
                    del message["id"]
                    body: dict[str, Any] = message
                    return body
                self.notifications.append(message)

    async def call(self, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "_meta": self.meta(**meta)}
        return await self.request("tools/call", params)


async def test_stateless_calls_on_the_fast_path_answer_like_the_session(
    make_settings: MakeSettings, tmp_path: Path
) -> None:
    entry = {"command": sys.executable, "args": [str(CONFORMANCE), "--stdio"], "cwd": str(REPO), "protocol": "legacy"}
    settings = make_settings({"fx": entry, "ds": stdio("ok", "ds", protocol="legacy")})
    log = tmp_path / "hub.log"
    argv = _hub(settings)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ds__echo", {"text": "héllo"}),
        ("ds__add", {"a": 1, "b": 2}),
        ("ds__image", {}),
        ("ds__fail", {"reason": "r"}),
        ("ds__add", {"a": "not a number"}),
        ("ds__nope", {}),
    ]
    with log.open("w") as errlog:
        async with await anyio.open_process(
            [argv.command, *argv.args], cwd=argv.cwd, stderr=errlog, env={**os.environ, **(argv.env or {})}
        ) as process:
            client = _RawClient(process)
            await client.request("server/discover", {"_meta": client.meta()})
            await client.call("ds__echo", {"text": "start"})  # starts the downstreams (normal path)
            await client.call("fx__test_simple_text", {})
            before = log.read_text().count(FAST)
            for name, arguments in calls:
                fast = await client.call(name, arguments)
                # The same call opted in to log messages goes through the SDK session: the answers must be equal.
                slow = await client.call(name, arguments, **{LOG_LEVEL: "debug"})
                assert fast == slow, name
                assert ("error" in fast) == (name == "ds__nope"), fast
                if "result" in fast:
                    assert fast["result"]["resultType"] == "complete"
            assert log.read_text().count(FAST) - before == len(calls) - 1  # all but the unknown tool

            # A downstream log message: without the opt-in nothing is sent (both paths); with it, it arrives.
            before = log.read_text().count(FAST)
            quiet = await client.call("fx__test_logging_tool", {})
            assert log.read_text().count(FAST) == before + 1
            assert not client.notifications
            loud = await client.call("fx__test_logging_tool", {}, **{LOG_LEVEL: "debug"})
            assert quiet == loud
            assert log.read_text().count(FAST) == before + 1
            logged = [n for n in client.notifications if n.get("method") == "notifications/message"]
            assert [n["params"]["data"] for n in logged] == ["test_logging_tool ran"]

            # A client that declared sampling needs the era bridge: the normal path answers it.
            sampled = await client.call("ds__echo", {"text": "x"}, capabilities={"sampling": {}})
            assert sampled["result"]["content"] == [{"type": "text", "text": "x"}]
            assert log.read_text().count(FAST) == before + 1
            assert process.stdin is not None
            await process.stdin.aclose()
