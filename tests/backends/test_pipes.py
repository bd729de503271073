"""The hub-owned downstream pipes: frames split or large, garbage, EOF mid-frame, answers racing a crash, shutdown."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import MCPError
from mcp.shared.message import SessionMessage

from hanzo_hub.backends.pipes import Launch, PipeTransport
from hanzo_hub.backends.rawchannel import RawChannel
from tests.conftest import REPO, alive, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60), pytest.mark.usefixtures("no_leaked_children")]


@asynccontextmanager
async def _wire() -> AsyncIterator[Launch]:
    yield Launch(sys.executable, ["-m", "tests.fixtures.wire"], cwd=str(REPO))


def _transport(tmp_path: Path, **options: int) -> tuple[PipeTransport, RawChannel]:
    channel = RawChannel()
    transport = PipeTransport(_wire, tmp_path / "logs" / "wire.log", **options)
    transport.bind(channel)
    return transport, channel


async def _next_message(read: object) -> types.JSONRPCMessage:
    with anyio.fail_after(10):
        item = await read.receive()  # type: ignore[attr-defined]
    assert isinstance(item, SessionMessage)
    return item.message


async def _read_on(read: object, into: list[SessionMessage | Exception]) -> None:
    """The session's side: read items as they come (a fast-path answer queued behind frames is woken when the
    session comes back for the next item, so it has handled every frame before it)."""
    while True:
        into.append(await read.receive())  # type: ignore[attr-defined]


async def _request_while_reading(
    channel: RawChannel, read: object, method: str, params: dict[str, object]
) -> tuple[dict[str, object], list[SessionMessage | Exception]]:
    """``channel.request`` while the session reads; returns the answer and what the session had read by then."""
    seen: list[SessionMessage | Exception] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_on, read, seen)
        with anyio.fail_after(10):
            answer = await channel.request(method, params)
        read_by_then = list(seen)
        tg.cancel_scope.cancel()
    assert seen
    return answer, read_by_then


async def test_a_frame_split_over_several_writes_is_one_answer(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    async with transport:
        with anyio.fail_after(10):
            assert await channel.request("split", {"n": 1}) == {"echo": {"n": 1}}
            assert await channel.request("plain", {"n": 2}) == {"echo": {"n": 2}}


async def test_a_compact_answer_comes_with_its_own_text_and_any_other_layout_without(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    params = {"text": "h\u00e9llo", "n": [1, 2.5, None]}
    async with transport:
        with anyio.fail_after(10):
            result, text = await channel.request_text("compact", params)
            assert result == {"echo": params}
            assert text is not None
            assert json.loads(text) == result
            assert text.decode("utf-8").startswith('{"echo":')
            extra, extra_text = await channel.request_text("compact_extra", params)
            assert extra == {"echo": params}
            assert extra_text is None  # the frame was decoded whole, so no text is handed on
            plain, plain_text = await channel.request_text("plain", params)
            assert plain == {"echo": params}
            assert plain_text is None


async def test_frames_larger_than_64_kib_reach_the_channel_and_the_session(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    async with transport as (read, _write):
        with anyio.fail_after(10):
            big = await channel.request("big", {"size": 300_000})
            assert big == {"text": "x" * 300_000}
        answer, seen = await _request_while_reading(channel, read, "notify_big", {"size": 200_000})
    assert answer == {"echo": {"size": 200_000}}
    assert len(seen) == 1  # the notification written first was the session's before the answer was the caller's
    assert isinstance(seen[0], SessionMessage)
    note = seen[0].message
    assert isinstance(note, types.JSONRPCNotification)
    assert note.params is not None
    assert note.params["data"] == "y" * 200_000


@pytest.mark.parametrize("size", [5_000, 300_000])  # within one read of the pipe, and over many
async def test_an_answer_over_the_message_cap_is_an_error_and_the_next_one_arrives(
    tmp_path: Path, size: int, caplog: pytest.LogCaptureFixture
) -> None:
    cap = size // 3
    transport, channel = _transport(tmp_path, max_message_bytes=cap)
    async with transport:
        with anyio.fail_after(10):
            with pytest.raises(MCPError) as caught:
                await channel.request("big", {"size": size})
            assert caught.value.error.code == types.INTERNAL_ERROR
            assert f"server 'wire' answered with more than {cap} bytes" in caught.value.error.message
            assert await channel.request("big", {"size": cap // 2}) == {"text": "x" * (cap // 2)}
            assert await channel.request("split", {"n": 1}) == {"echo": {"n": 1}}
    assert any("was over" in r.getMessage() for r in caplog.records)


async def test_a_notification_over_the_message_cap_is_dropped_and_the_answer_after_it_arrives(
    tmp_path: Path,
) -> None:
    transport, channel = _transport(tmp_path, max_message_bytes=100_000)
    async with transport as (read, _write):
        with anyio.fail_after(10):
            assert await channel.request("notify_big", {"size": 200_000}) == {"echo": {"size": 200_000}}
            assert await channel.request("two", {"k": "v"}) == {"echo": {"k": "v"}}
            note = await _next_message(read)  # the big notification never reached the session; this one did
    assert isinstance(note, types.JSONRPCNotification)
    assert note.params is not None
    assert note.params["data"] == "after"


async def test_a_garbage_line_reaches_the_session_as_an_error_and_the_answer_still_arrives(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    async with transport as (read, _write):
        answer, seen = await _request_while_reading(channel, read, "garbage", {})
    assert answer == {"echo": {}}
    assert len(seen) == 1
    assert isinstance(seen[0], ValueError)


async def test_frames_after_an_answer_in_the_same_write_go_to_the_session(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    async with transport as (read, _write):
        with anyio.fail_after(10):
            assert await channel.request("two", {"k": "v"}) == {"echo": {"k": "v"}}
        note = await _next_message(read)
    assert isinstance(note, types.JSONRPCNotification)
    assert note.method == "notifications/message"


async def test_a_server_request_quoting_the_id_is_the_sessions_not_an_answer(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    async with transport as (read, _write):
        answer, seen = await _request_while_reading(channel, read, "quote", {})
    assert answer == {"echo": {}}
    assert len(seen) == 1
    assert isinstance(seen[0], SessionMessage)
    ask = seen[0].message
    assert isinstance(ask, types.JSONRPCRequest)
    assert ask.method == "ping"
    assert ask.id == 7


async def test_error_answers_raise_with_the_servers_code_and_a_malformed_one_is_an_internal_error(
    tmp_path: Path,
) -> None:
    transport, channel = _transport(tmp_path)
    async with transport:
        with anyio.fail_after(10):
            with pytest.raises(MCPError) as refused:
                await channel.request("error", {})
            with pytest.raises(MCPError) as malformed:
                await channel.request("bad_error", {})
    assert (refused.value.code, refused.value.error.message, refused.value.error.data) == (-32001, "nope", [1])
    assert malformed.value.code == types.INTERNAL_ERROR


async def test_eof_in_the_middle_of_a_frame_fails_the_request_and_ends_the_read_stream(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    async with transport as (read, _write):
        with anyio.fail_after(10):
            with pytest.raises(MCPError) as lost:
                await channel.request("half", {})
            with pytest.raises(anyio.EndOfStream):
                await read.receive()
        assert not channel.open
        assert transport.pid is not None
        pid = transport.pid
    assert lost.value.code == types.CONNECTION_CLOSED
    assert not alive(pid)


async def _send_until_broken(write: object) -> bool:
    """Whether the session's writes fail once the process is gone (the pipe's loss is seen a moment later)."""
    for _ in range(100):
        try:
            await write.send(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping")))  # type: ignore[attr-defined]
        except anyio.BrokenResourceError:
            return True
        await anyio.sleep(0.02)
    return False


async def test_an_answer_written_just_before_a_crash_is_delivered_and_the_next_request_fails(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    async with transport as (read, write):
        with anyio.fail_after(10):
            assert await channel.request("answer_exit", {"last": True}) == {"echo": {"last": True}}
            with pytest.raises(anyio.EndOfStream):
                await read.receive()
            with pytest.raises(MCPError) as after:
                await channel.request("plain", {})
            assert await _send_until_broken(write)
    assert after.value.code == types.CONNECTION_CLOSED


async def test_the_session_side_reaches_the_server_and_hears_its_answers(tmp_path: Path) -> None:
    transport, _channel = _transport(tmp_path)
    async with transport as (read, write):
        await write.send(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=41, method="plain", params={"a": 1})))
        answer = await _next_message(read)
    assert isinstance(answer, types.JSONRPCResponse)
    assert (answer.id, answer.result) == (41, {"echo": {"a": 1}})


async def test_a_server_that_ignores_eof_and_sigterm_is_killed_with_its_process_group(tmp_path: Path) -> None:
    transport, channel = _transport(tmp_path)
    started = anyio.current_time()
    async with transport:
        with anyio.fail_after(10):
            answer = await channel.request("stubborn", {})
        grandchild = answer["grandchild"]
        assert alive(grandchild)
        pid = transport.pid
        started = anyio.current_time()
    took = anyio.current_time() - started
    assert pid is not None
    assert not alive(pid)
    await wait_until(lambda: not alive(grandchild), timeout=5)  # SIGKILLed with the group; dying takes a moment
    assert took < 8  # stdin closed, 2 s grace, SIGTERM, 2 s, SIGKILL


async def test_a_missing_command_raises_file_not_found(tmp_path: Path) -> None:
    @asynccontextmanager
    async def missing() -> AsyncIterator[Launch]:
        yield Launch(str(tmp_path / "no-such-server"), [])

    with pytest.raises(FileNotFoundError):
        async with PipeTransport(missing, tmp_path / "logs" / "missing.log"):
            pass
