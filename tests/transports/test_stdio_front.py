"""The stdio front's event-loop reader: split and large lines, garbage, a last line without newline, taken calls."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Iterator

import anyio
import anyio.to_thread
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from hanzo_hub.hub.fastcall import RequestLike
from hanzo_hub.transports.stdio import event_loop_stdio

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    """(front's stdin, test's writer to it, front's stdout, test's reader of it)."""
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    yield r_in, w_in, w_out, r_out
    for fd in (r_in, w_in, w_out, r_out):
        with contextlib.suppress(OSError):
            os.close(fd)


async def _line(fd: int) -> dict[str, object]:
    data = b""
    with anyio.fail_after(10):
        while not data.endswith(b"\n"):
            data += await anyio.to_thread.run_sync(os.read, fd, 65536)
    decoded: dict[str, object] = json.loads(data)
    return decoded


async def _message(read: object) -> types.JSONRPCMessage:
    with anyio.fail_after(10):
        item = await read.receive()  # type: ignore[attr-defined]
    assert isinstance(item, SessionMessage), item
    return item.message


async def test_split_large_and_garbage_lines_reach_the_session_in_order(pipes: tuple[int, int, int, int]) -> None:
    r_in, w_in, w_out, r_out = pipes
    async with event_loop_stdio(r_in, w_out) as (read, write):
        os.write(w_in, b'{"jsonrpc":"2.0","id":1,"me')
        await anyio.sleep(0.05)
        os.write(w_in, b'thod":"ping"}\n\n')
        big = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "z" * 200_000}})
        os.write(w_in, b"not json\n")
        await anyio.to_thread.run_sync(os.write, w_in, big.encode() + b"\n")
        ping = await _message(read)
        with anyio.fail_after(10):
            garbage = await read.receive()
        note = await _message(read)
        await write.send(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result={})))
        answer = await _line(r_out)
    assert isinstance(ping, types.JSONRPCRequest)
    assert ping.method == "ping"
    assert isinstance(garbage, ValueError)
    assert isinstance(note, types.JSONRPCNotification)
    assert note.params == {"data": "z" * 200_000}
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_a_last_message_without_newline_is_delivered_then_the_stream_ends(
    pipes: tuple[int, int, int, int],
) -> None:
    r_in, w_in, w_out, _r_out = pipes
    async with event_loop_stdio(r_in, w_out) as (read, _write):
        os.write(w_in, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        os.close(w_in)
        last = await _message(read)
        with anyio.fail_after(10), pytest.raises(anyio.EndOfStream):
            await read.receive()
    assert isinstance(last, types.JSONRPCNotification)


async def test_intercepted_requests_are_answered_by_the_transport_and_a_cancelled_one_gets_no_answer(
    pipes: tuple[int, int, int, int],
) -> None:
    r_in, w_in, w_out, r_out = pipes
    slow_started, cancelled = anyio.Event(), anyio.Event()

    def intercept(message: types.JSONRPCRequest) -> Callable[[], Awaitable[types.JSONRPCMessage]] | None:
        if message.method != "tools/call":
            return None

        async def answer() -> types.JSONRPCMessage:
            if (message.params or {}).get("name") == "slow":
                slow_started.set()
                try:
                    await anyio.sleep(60)
                finally:
                    cancelled.set()
            return types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result={"taken": message.params})

        return answer

    async with event_loop_stdio(r_in, w_out, intercept=intercept) as (read, _write):
        call = {"jsonrpc": "2.0", "method": "tools/call"}
        os.write(w_in, json.dumps({**call, "id": "s", "params": {"name": "slow"}}).encode() + b"\n")
        with anyio.fail_after(10):
            await slow_started.wait()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s"}}
        os.write(w_in, json.dumps(cancel).encode() + b"\n")
        with anyio.fail_after(10):
            await cancelled.wait()
        os.write(w_in, json.dumps({**call, "id": 2, "params": {"name": "fast"}}).encode() + b"\n")
        os.write(w_in, b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
        answer = await _line(r_out)
        ping = await _message(read)
    assert answer == {"jsonrpc": "2.0", "id": 2, "result": {"taken": {"name": "fast"}}}  # nothing for "s"
    assert isinstance(ping, types.JSONRPCRequest)
    assert ping.id == 3


async def test_answers_still_running_at_shutdown_are_cancelled(pipes: tuple[int, int, int, int]) -> None:
    r_in, w_in, w_out, _r_out = pipes
    started, stopped = anyio.Event(), anyio.Event()

    def intercept(message: types.JSONRPCRequest) -> Callable[[], Awaitable[types.JSONRPCMessage]] | None:
        async def answer() -> types.JSONRPCMessage:
            started.set()
            try:
                await anyio.sleep(60)
            finally:
                stopped.set()
            raise AssertionError("not reached")

        return answer

    with anyio.fail_after(10):
        async with event_loop_stdio(r_in, w_out, intercept=intercept):
            os.write(w_in, b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}\n')
            await started.wait()
    assert stopped.is_set()


async def test_a_call_decoded_by_hand_is_the_typed_request_and_an_encoded_answer_goes_out_verbatim(
    pipes: tuple[int, int, int, int],
) -> None:
    r_in, w_in, w_out, r_out = pipes
    seen: list[RequestLike] = []

    def intercept(message: RequestLike) -> Callable[[], Awaitable[types.JSONRPCMessage | bytes]] | None:
        if (message.params or {}).get("name") == "session":
            return None
        seen.append(message)

        async def answer() -> bytes:
            return b'{"jsonrpc":"2.0","id":' + json.dumps(message.id).encode() + b',"result":{"as":"written"}}\n'

        return answer

    lines = [
        b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{"t":"h\\u00e9","n":[1,2.5]}}}',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"y","_meta":{"k":{"deep":null}}}}',
    ]
    async with event_loop_stdio(r_in, w_out, intercept=intercept) as (read, _write):
        for line in lines:
            os.write(w_in, line + b"\n")
            assert await _line(r_out) == {"jsonrpc": "2.0", "id": json.loads(line)["id"], "result": {"as": "written"}}
        # Not taken: the session gets it, parsed by the typed adapter as before.
        os.write(w_in, b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"session"}}\n')
        left = await _message(read)
    for line, message in zip(lines, seen, strict=True):
        typed = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        assert isinstance(typed, types.JSONRPCRequest)
        assert (message.id, message.method, message.params) == (typed.id, typed.method, typed.params)
    assert isinstance(left, types.JSONRPCRequest)
    assert left.id == 8
