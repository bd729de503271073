"""The ``tools/call`` fast path on the stdio front: ``hanzo-hub serve`` answers eligible calls on its transport.

A real hub process (spawned like a client spawns it) in front of a real handshake-era downstream process. The hub's
debug log says which calls took the transport's fast path; the answers must equal a direct connection's, and the
relay (sampling to this client, cancellation to the server) must keep working through it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
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


async def test_stdio_fast_path_answers_like_the_server(make_settings: MakeSettings, tmp_path: Path) -> None:
    settings = make_settings({"ds": stdio("ok", "ds", protocol="legacy"), "other": inproc("beta")})
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
    assert log.read_text().count(FAST) >= len(calls)  # the first call too, when discovery had started the server


async def test_sampling_and_cancellation_through_the_stdio_fast_path(
    make_settings: MakeSettings, tmp_path: Path
) -> None:
    entry = {"command": sys.executable, "args": [str(CONFORMANCE), "--stdio"], "cwd": str(REPO), "protocol": "legacy"}
    settings = make_settings({"fx": entry, "ds": stdio("ok", "ds", protocol="legacy")})
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
