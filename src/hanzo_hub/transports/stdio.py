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
import contextlib
import fcntl
import logging
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub, freeze_startup_heap
from hanzo_hub.hub.fastcall import RawToolCalls
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


Intercept = Callable[[types.JSONRPCRequest], Callable[[], Awaitable[types.JSONRPCMessage]] | None]
"""Takes a request away from the SDK session: returns what answers it, or ``None`` to leave it to the session."""


class _Pumps:
    """The two pumps of :func:`event_loop_stdio` and the requests its ``intercept`` took."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, intercept: Intercept | None) -> None:
        self.reader, self.writer, self.intercept = reader, writer, intercept
        self.read_send, self.read_receive = create_context_streams[SessionMessage | Exception](0)
        self.write_send, self.write_receive = create_context_streams[SessionMessage](0)
        self.taken: dict[types.RequestId, anyio.CancelScope] = {}

    async def answer(self, request_id: types.RequestId, make: Callable[[], Awaitable[types.JSONRPCMessage]]) -> None:
        with anyio.CancelScope() as scope:
            self.taken[request_id] = scope
            try:
                response = await make()
            finally:
                self.taken.pop(request_id, None)
            # Straight onto the pipe (a whole line per write, so it cannot interleave with the session's lines).
            self.writer.write(response.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n")
            with contextlib.suppress(ConnectionError):  # the client went away; the session ends on its own
                await self.writer.drain()

    def divert(self, message: types.JSONRPCMessage, tg: anyio.abc.TaskGroup) -> bool:
        """Whether ``message`` was handled here instead of going to the session."""
        if self.intercept is None:
            return False
        if isinstance(message, types.JSONRPCRequest):
            make = self.intercept(message)
            if make is None:
                return False
            tg.start_soon(self.answer, message.id, make)
            return True
        if isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            scope = self.taken.get((message.params or {}).get("requestId"))  # type: ignore[arg-type]
            if scope is not None:
                scope.cancel()  # the client gave up: no answer goes out (the spec's rule for cancelled requests)
                return True
        return False

    async def pump_in(self, tg: anyio.abc.TaskGroup) -> None:
        async with self.read_send:
            while True:
                try:
                    line = await self.reader.readline()
                except ValueError as exc:  # longer than LINE_LIMIT: the reader dropped it
                    await self.read_send.send(exc)
                    continue
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    await self.read_send.send(exc)
                    continue
                if not self.divert(message, tg):
                    await self.read_send.send(SessionMessage(message))

    async def pump_out(self) -> None:
        async with self.write_receive:
            async for session_message in self.write_receive:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                self.writer.write(data.encode("utf-8") + b"\n")
                await self.writer.drain()


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
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
    )
    write_transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
    )
    pumps = _Pumps(reader, asyncio.StreamWriter(write_transport, protocol, None, loop), intercept)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pumps.pump_in, tg)
            tg.start_soon(pumps.pump_out)
            yield pumps.read_receive, pumps.write_send
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
