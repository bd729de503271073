"""Serving the hub over stdin/stdout. Logs go to stderr, never stdout.

When stdin and stdout are pipes or sockets (how every MCP client launches a server), both are registered with the
event loop: a message crosses no thread on its way in or out. The SDK's ``stdio_server`` reads and writes through
worker threads, and on a loaded machine each crossing waits for the scheduler (``bench/proxy_overhead.py``
measured a third of the hub's per-call latency there). Anything else (a terminal, a file) takes the SDK transport
with a daemon-thread stdin reader. Either way the standard descriptors are diverted first (stdin reads see EOF,
stdout writes go to stderr), so a library that prints cannot corrupt the protocol.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import fcntl
import json
import logging
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.fastcall import RawToolCalls, RequestLike
from hanzo_hub.hub.heap import freeze_startup_heap
from hanzo_hub.hub.server import build_server, initialization_options

logger = logging.getLogger(__name__)

READ_SIZE = 65536
LINE_LIMIT = 256 * 1024 * 1024
"""Longest message accepted on stdin; a longer line is answered with a parse error and skipped."""


class _StdinLines:
    """Lines of stdin, read from the raw descriptor by a daemon thread.

    The SDK reads stdin in an anyio worker thread that cancellation must wait for, so a hub told to stop (SIGTERM)
    while its client keeps stdin open never exited. A daemon thread may stay blocked in ``os.read``: the hub shuts
    down and the process exits without joining it (an unbuffered read holds no lock that finalization needs).
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def __aiter__(self) -> AsyncIterator[str]:
        send, receive = anyio.create_memory_object_stream[str](1)
        token = anyio.lowlevel.current_token()

        def pump() -> None:
            pending = b""
            try:
                while chunk := os.read(self._fd, READ_SIZE):
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        anyio.from_thread.run(send.send, line.decode("utf-8", "replace") + "\n", token=token)
                if pending:
                    anyio.from_thread.run(send.send, pending.decode("utf-8", "replace"), token=token)
            except (anyio.BrokenResourceError, RuntimeError, OSError):  # the hub stopped listening, or the loop ended
                return
            finally:
                with contextlib.suppress(RuntimeError):
                    anyio.from_thread.run_sync(send.close, token=token)

        threading.Thread(target=pump, name="hanzo-hub stdin", daemon=True).start()
        async with receive:
            async for line in receive:
                yield line


def _pipe_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _divert(fd: int, flags: int, target: int | None = None) -> int:
    """Move ``fd``'s wire to a private close-on-exec descriptor and point ``fd`` at /dev/null (or ``target``)."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    if target is None:
        null = os.open(os.devnull, flags)
        os.dup2(null, fd)
        os.close(null)
    else:
        os.dup2(target, fd)
    return private


Answer = Callable[[], Awaitable[types.JSONRPCMessage | bytes]]
"""Makes the response to a taken request: a message, or its encoded line (with the newline)."""
Intercept = Callable[[RequestLike], Answer | None]
"""Takes a request away from the SDK session: returns what answers it, or ``None`` to leave it to the session."""

READ_AHEAD = 32
"""Messages queued for the session before the hub stops reading stdin (until the session catches up)."""
ANSWER_STOP_TIMEOUT = 5.0
"""On shutdown, how long the cancelled fast-path answers may take to wind down (they tell downstreams, bounded)."""


_TOOLS_CALL = b'"tools/call"'
_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _quick_request(line: bytes) -> _Quick | None:
    """A request line decoded by ``json`` alone and checked by hand, or ``None`` (then the typed parse decides).

    Only what the SDK's model would check is checked: the envelope's keys, ``"2.0"``, an integer or string id, a
    string method, object params. ``NaN`` and ``Infinity`` are refused (pydantic refuses them too).
    """
    try:
        decoded = _DECODER.decode(line.decode("utf-8", "surrogatepass"))  # json.loads(bytes), less its set-up
    except ValueError:
        return None
    if not isinstance(decoded, dict) or decoded.keys() - _ENVELOPE or decoded.get("jsonrpc") != "2.0":
        return None
    request_id, method, params = decoded.get("id"), decoded.get("method"), decoded.get("params")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str) or not isinstance(method, str):
        return None
    if params is not None and not isinstance(params, dict):
        return None
    return _Quick(request_id, method, params)


class _Quick:
    """A request decoded by :func:`_quick_request`: what ``intercept`` reads, without building the SDK's model (a
    request the fast path does not take is parsed again, typed, for the session)."""

    __slots__ = ("id", "method", "params")

    def __init__(self, request_id: types.RequestId, method: str, params: dict[str, Any] | None) -> None:
        self.id = request_id
        self.method = method
        self.params = params


class _Front(asyncio.Protocol):
    """Reads stdin in the event loop's callback: each line is parsed there, and a request ``intercept`` takes is
    answered by a task started right there (no reader task in between); the rest queue for the session, in order.

    A request is only intercepted when nothing is queued before it, so the session and the fast path see requests in
    the order they came. The client's ``notifications/cancelled`` for a taken request cancels its task (no answer
    goes out, the spec's rule for cancelled requests).
    """

    def __init__(self, intercept: Intercept | None) -> None:
        self.intercept = intercept
        self.read_send, self.read_receive = create_context_streams[SessionMessage | Exception](0)
        self.write_send, self.write_receive = create_context_streams[SessionMessage](0)
        self.writer: asyncio.StreamWriter | None = None
        self.taken: dict[types.RequestId, asyncio.Task[None]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.backlog: collections.deque[SessionMessage | Exception] = collections.deque()
        self.more = asyncio.Event()
        self.eof = False
        self._transport: asyncio.ReadTransport | None = None
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False
        self._paused = False
        self._context = contextvars.copy_context()

    # -- asyncio callbacks ------------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        start, end = 0, data.find(b"\n")
        while end >= 0:
            if self._parts or self._skipping:
                self._parts.append(data[start:end])
                line, skipped = b"".join(self._parts), self._skipping
                self._parts.clear()
                self._size, self._skipping = 0, False
                if not skipped:
                    self._line(line)
            else:
                self._line(data[start:end])
            start, end = end + 1, data.find(b"\n", end + 1)
        if start < len(data):
            self._partial(data[start:])
        if not self._paused and len(self.backlog) >= READ_AHEAD and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def eof_received(self) -> bool | None:
        if self._parts and not self._skipping:
            self._line(b"".join(self._parts))  # a last message without its newline
        self._parts.clear()
        self.eof = True
        self.more.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.more.set()

    # -- lines ------------------------------------------------------------------------------------------------------

    def _partial(self, chunk: bytes) -> None:
        if self._skipping:
            return
        self._size += len(chunk)
        if self._size > LINE_LIMIT:
            self._parts.clear()
            self._skipping = True  # drop the rest of the line, answer a parse error
            self._queue(ValueError(f"message longer than {LINE_LIMIT} bytes"))
            return
        self._parts.append(chunk)

    def _line(self, line: bytes) -> None:
        if not line.strip():
            return
        if self.intercept is not None and not self.backlog and _TOOLS_CALL in line:
            quick = _quick_request(line)
            if quick is not None and self._take(quick):
                return  # (one not taken is parsed again below, for the session)
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            self._queue(exc)
            return
        if not self.backlog and self.divert(message):
            return
        self._queue(SessionMessage(message))

    def _queue(self, item: SessionMessage | Exception) -> None:
        self.backlog.append(item)
        self.more.set()

    def divert(self, message: types.JSONRPCMessage) -> bool:
        """Whether ``message`` was handled here instead of going to the session."""
        if self.intercept is None:
            return False
        if isinstance(message, types.JSONRPCRequest):
            return self._take(message)
        if isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            running = self.taken.get(request_id)  # type: ignore[arg-type]
            if running is not None:
                running.cancel()
                self._forget(request_id, running)  # type: ignore[arg-type]  # (one cancelled before it ran: no cleanup)
                return True
        return False

    def _take(self, request: RequestLike) -> bool:
        """Whether ``intercept`` took ``request`` (then a task of this connection answers it)."""
        assert self.intercept is not None
        make = self.intercept(request)
        if make is None:
            return False
        task = asyncio.get_running_loop().create_task(self.answer(request.id, make), context=self._context.copy())
        self.taken[request.id] = task
        self.tasks.add(task)
        return True

    def _forget(self, request_id: types.RequestId, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if self.taken.get(request_id) is task:
            del self.taken[request_id]

    async def answer(self, request_id: types.RequestId, make: Answer) -> None:
        """Answer one taken request (its own cleanup, not a done callback: that would cost an event-loop turn)."""
        task = asyncio.current_task()
        assert task is not None
        assert self.writer is not None
        try:
            response = await make()
            self._forget(request_id, task)
            # Straight onto the pipe (a whole line per write, so it cannot interleave with the session's lines).
            if not isinstance(response, bytes):
                response = response.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
            self.writer.write(response)
            if self.writer.transport.get_write_buffer_size():  # drain only what the pipe did not take at once
                await self.writer.drain()
        except ConnectionError:
            pass  # the client went away; the session ends on its own
        except Exception:  # a transport task: one bad answer must not go unheard
            logger.exception("a fast-path answer failed")
        finally:
            self._forget(request_id, task)

    # -- pumps ------------------------------------------------------------------------------------------------------

    async def pump_in(self) -> None:
        """Hand the queued messages to the session, in order (a request queued behind others may be diverted)."""
        async with self.read_send:
            while True:
                while self.backlog:
                    item = self.backlog.popleft()
                    if self._paused and len(self.backlog) < READ_AHEAD // 2 and self._transport is not None:
                        self._paused = False
                        self._transport.resume_reading()
                    if isinstance(item, SessionMessage) and self.divert(item.message):
                        continue
                    await self.read_send.send(item)
                if self.eof:
                    return
                self.more.clear()
                await self.more.wait()

    async def pump_out(self) -> None:
        assert self.writer is not None
        async with self.write_receive:
            async for session_message in self.write_receive:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                self.writer.write(data.encode("utf-8") + b"\n")
                await self.writer.drain()

    async def stop_answers(self) -> None:
        """Cancel the fast-path answers still running and wait for them (bounded)."""
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=ANSWER_STOP_TIMEOUT)


@asynccontextmanager
async def event_loop_stdio(
    stdin_fd: int = 0, stdout_fd: int = 1, intercept: Intercept | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """Read and write streams like the SDK's ``stdio_server``, with both pipes on the event loop (asyncio only).

    ``intercept`` sees every request first (the ``tools/call`` fast path): a request it takes is answered by a task
    of this transport, and the client's ``notifications/cancelled`` for it cancels that task.
    """
    loop = asyncio.get_running_loop()
    wire_in = _divert(stdin_fd, os.O_RDONLY)
    wire_out = _divert(stdout_fd, os.O_WRONLY, target=2)
    front = _Front(intercept)
    read_transport, _ = await loop.connect_read_pipe(lambda: front, os.fdopen(wire_in, "rb", buffering=0))
    write_transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
    )
    front.writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(front.pump_in)
            tg.start_soon(front.pump_out)
            try:
                yield front.read_receive, front.write_send
            finally:
                with anyio.CancelScope(shield=True):
                    await front.stop_answers()
            tg.cancel_scope.cancel()
    finally:
        read_transport.close()
        write_transport.close()


@asynccontextmanager
async def _front_streams(intercept: Intercept | None) -> AsyncIterator[tuple[Any, Any]]:
    if _pipe_like(0) and _pipe_like(1) and _on_asyncio():
        async with event_loop_stdio(intercept=intercept) as streams:
            yield streams
        return
    stdin = cast("anyio.AsyncFile[str]", _StdinLines(sys.stdin.fileno()))
    async with stdio_server(stdin=stdin) as streams:
        yield streams


def _on_asyncio() -> bool:
    """Whether an asyncio event loop runs this task (the pipes are registered with it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def serve_stdio(settings: HubSettings) -> None:
    """Serve until the client closes stdin or the task is cancelled; every downstream server is stopped first."""
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        freeze_startup_heap()
        fast = next((m for m in server.middleware if isinstance(m, RawToolCalls)), None)
        async with _front_streams(fast.intercept if fast is not None else None) as (read, write):
            await server.run(read, write, initialization_options(server))
