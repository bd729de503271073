"""An acknowledged memory survives ``kill -9`` of a real ``hanzo-hub serve`` process.

The first hub is driven over its stdio with raw JSON-RPC lines, so the test knows the exact moment a reply was
received and kills the process (SIGKILL, no shutdown of any kind) right then. A second hub on the same home must
return every acknowledged memory.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, StdioServerParameters

from tests.conftest import REPO, MakeSettings, hub_command
from tests.memory._hub import MEMORY, SERVERS, call, listed, recalled

WRITES = 5


async def _request(proc: Process, lines: BufferedByteReceiveStream, rid: int, method: str, params: Any) -> Any:
    """Send one JSON-RPC request and return its response (skipping notifications and server requests)."""
    assert proc.stdin is not None
    message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    await proc.stdin.send(json.dumps(message).encode() + b"\n")
    with anyio.fail_after(60):
        while True:
            reply = json.loads(await lines.receive_until(b"\n", 10_000_000))
            if reply.get("id") == rid and "method" not in reply:
                return reply


@pytest.mark.integration
async def test_acknowledged_memories_survive_kill_9_of_the_hub(make_settings: MakeSettings) -> None:
    settings = make_settings(SERVERS, memory=MEMORY)
    contents = [
        f"fact number {i}: the {word} key opens door {i}"
        for i, word in enumerate(["red", "blue", "green", "gold", "tin"])
    ]
    log = (settings.home / "first-hub.log").open("wb")
    proc = await anyio.open_process(hub_command(settings), cwd=REPO, stderr=log)
    try:
        assert proc.stdout is not None
        assert proc.stdin is not None
        lines = BufferedByteReceiveStream(proc.stdout)
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "crash", "version": "1"}}
        await _request(proc, lines, 0, "initialize", init)
        await proc.stdin.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for i, content in enumerate(contents[:WRITES], start=1):
            arguments = {"content": content, "tier": "project" if i % 2 else "global"}
            reply = await _request(proc, lines, i, "tools/call", {"name": "memory__remember", "arguments": arguments})
            assert not reply["result"].get("isError"), reply
        proc.kill()  # SIGKILL right after the last acknowledgement
        with anyio.fail_after(10):
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()
    assert proc.returncode == -9

    params = StdioServerParameters(command=sys.executable, args=hub_command(settings)[1:], cwd=str(REPO))
    async with Client(params, mode="legacy") as client:
        everything = await call(client, "list_memories", {"limit": 200})
        last = await call(client, "recall", {"query": contents[-1]})
    assert sorted(listed(everything)) == sorted(contents)
    assert recalled(last)[0] == contents[-1]
