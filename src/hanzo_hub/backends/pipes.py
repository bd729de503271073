"""A downstream server's stdin/stdout owned by the hub: asyncio pipes read and written on the event loop.

The SDK's ``stdio_client`` moves every line through anyio process streams, a reader task, a text decoder, a pydantic
parse and a zero-buffer memory stream before the session's receive loop sees it. Here the pipes are registered with
the event loop through a subprocess protocol, and each newline-delimited frame is handled in the callback that read
it: a frame answering one of the raw channel's requests (``hanzo_hub.backends.rawchannel``, ids ``hub-<hex>-N``) is
handed to its waiting request by an id scan, before any typed parsing; every other frame is parsed once and queued for
the SDK ``ClientSession`` (its read stream), so everything the session does keeps working. Writes go straight onto the
stdin pipe, one whole line per write, with flow control (a write waits while the pipe's buffer is full).

What the SDK transport guarantees is kept: the server runs in its own session (process group), stderr goes to the
caller's file (read here and written line by line, with secrets replaced and the file rotated:
``hanzo_hub.line_log``), the read side ends when stdout reaches EOF
(unparseable lines surface as exceptions on the read stream, a partial last line is dropped), and shutdown is
bounded and shielded: stop reading into the session, flush, close stdin, wait ``PROCESS_TERMINATION_TIMEOUT``,
SIGTERM then SIGKILL the process group, wait ``FLUSH_TIMEOUT`` for stderr's last bytes, close the transport.

Two things the SDK does not do. A message longer than ``max_message_bytes`` (``backends.max_message_bytes``) is
skipped as it streams in, never held whole; when its first bytes show it answered a request, that request gets a
JSON-RPC error at once (``_refusal``), and the stream goes on at the next line. And on Linux the server is started
with a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGTERM)``), so a hub that dies without cleaning up (SIGKILL,
the OOM killer) takes its servers with it, even those that ignore their stdin closing. bubblewrap's
``--die-with-parent`` does the same for sandboxed servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import json
import logging
import math
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import cast

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from hanzo_hub.backends.broken_answers import HEAD, answer_to_frame, answered_id
from hanzo_hub.backends.rawchannel import RawChannel
from hanzo_hub.line_log import LineLog

logger = logging.getLogger(__name__)

PROCESS_TERMINATION_TIMEOUT = 2.0
"""Grace for the server to exit on its own after its stdin closed (the SDK's)."""
FORCE_KILL_TIMEOUT = 2.0
"""After SIGTERM to the process group, how long before SIGKILL."""
REAP_TIMEOUT = 2.0
"""How long to wait for the event loop to see a killed server exit."""
FLUSH_TIMEOUT = 0.5
"""How long a write waiting on a full pipe may hold up shutdown."""
READ_AHEAD = 32
"""Frames queued for the session before the hub stops reading the server's stdout (until the session catches up)."""
_POLL = 0.01
MAX_MESSAGE_BYTES = 64 * 1024**2
"""The default cap on one message from a server's stdout (``backends.max_message_bytes``)."""


PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (Linux), looked up once; ``None`` elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return cast(Callable[..., int], prctl)


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has Linux send the child SIGTERM when the hub dies; ``None`` where that is unavailable.

    ``prctl`` is looked up before the fork, so the child only makes the system call. The signal follows the thread
    that forked, the event loop's, which lives as long as the hub serves. If the hub died between the fork and the
    call, the child signals itself.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    hub, term = os.getpid(), int(signal.SIGTERM)

    def set_parent_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, term, 0, 0, 0)
        if os.getppid() != hub:
            os.kill(os.getpid(), term)

    return set_parent_death_signal


_Item = SessionMessage | Exception | Callable[[], None]
"""A queued frame for the session, or a raw-channel answer to wake once the session has read what came before."""


def _refusal(head: bytes, limit: int, server: str) -> bytes | None:
    """For a message dropped for its size (``head``: its first bytes): an error answer to the request it answered, or
    ``None`` when it answered none that can be told (a request or notification of the server's own)."""
    request_id = answered_id(head)
    if request_id is None:
        logger.error(
            "%s: a message over %d bytes was dropped (backends.max_message_bytes): %.200r", server, limit, head
        )
        return None
    logger.error("%s: its answer to request %r was over %d bytes and was dropped", server, request_id, limit)
    message = (
        f"server {server!r} answered with more than {limit} bytes (backends.max_message_bytes); the hub dropped it"
    )
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": types.INTERNAL_ERROR, "message": message}}
    return json.dumps(error).encode()


class _Wire(asyncio.SubprocessProtocol):
    """The subprocess protocol: splits stdout into frames and routes each one (see the module docstring)."""

    def __init__(
        self,
        channel: RawChannel | None,
        queue: MemoryObjectSendStream[_Item],
        max_bytes: int = MAX_MESSAGE_BYTES,
        server: str = "server",
    ) -> None:
        self.channel = channel
        self.server = server
        self.queue = queue
        self.max_bytes = max_bytes
        """A message longer than this is dropped (0: no cap); a request it answered gets an error instead."""
        self.queued = 0
        """Items sent to the session's queue that its reader has not taken yet (cheaper than the stream's statistics;
        it also counts an item handed straight to a waiting reader that has not run yet)."""
        self.transport: asyncio.SubprocessTransport | None = None
        self.exited = asyncio.Event()
        self.stdout_closed = asyncio.Event()
        self.stdin_lost = False
        self.stderr: LineLog | None = None
        """Where stderr goes (``None``: nowhere)."""
        self.stderr_closed = asyncio.Event()
        self.discard = False  # shutting down: frames are read (so the server can flush) and dropped
        self._parts: list[bytes] = []
        self._size = 0
        self._dropping: bytes | None = None
        """The head of an oversized message being skipped up to its newline (``None``: none)."""
        self._paused_reading = False
        self._paused_writing = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    # -- asyncio callbacks ------------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.SubprocessTransport, transport)  # uvloop's transports do not subclass asyncio's

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            if fd == 2 and self.stderr is not None:
                self.stderr.write(data)
            return
        start = 0
        end = data.find(b"\n")
        if end < 0:
            self._partial(data)
            return
        if self._parts or self._dropping is not None:
            self._partial(data[:end])
            self._end_of_line()
            start = end + 1
            end = data.find(b"\n", start)
        while end >= 0:
            if self.max_bytes and end - start > self.max_bytes:
                self._partial(data[start:end])
                self._end_of_line()
            else:
                self._frame(data[start:end])
            start = end + 1
            end = data.find(b"\n", start)
        if start < len(data):
            self._partial(data[start:])
        if not self._paused_reading and self.queued >= READ_AHEAD:
            self._pause_reading(True)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 0:
            self.stdin_lost = True
            self._wake_writers()
        elif fd == 2:
            if self.stderr is not None:
                self.stderr.close()  # the file is closed again when the run ends (closing twice is harmless)
            self.stderr_closed.set()
        elif fd == 1:
            if self._parts:
                logger.debug("server stdout ended inside a line (%d bytes dropped)", self._size)
                self._parts.clear()
            self._size, self._dropping = 0, None
            self.stdout_closed.set()
            if self.channel is not None:
                self.channel.close()  # every fast-path request still waiting has lost its answer
            self.queue.close()  # the session sees the end of the stream once it has read what came before

    def process_exited(self) -> None:
        self.exited.set()

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        self._wake_writers()

    # -- frames -----------------------------------------------------------------------------------------------------

    def _partial(self, chunk: bytes) -> None:
        """Part of a message whose newline has not come yet; past ``max_bytes`` the rest of it is skipped."""
        if self._dropping is not None:
            return
        self._size += len(chunk)
        self._parts.append(chunk)
        if self.max_bytes and self._size > self.max_bytes:
            head = bytearray()
            for part in self._parts:
                head += part[: HEAD - len(head)]
                if len(head) >= HEAD:
                    break
            self._dropping = bytes(head)
            self._parts.clear()

    def _end_of_line(self) -> None:
        if self._dropping is None:
            frame = b"".join(self._parts)
            self._parts.clear()
            self._size = 0
            self._frame(frame)
            return
        head, self._dropping, self._size = self._dropping, None, 0
        answer = _refusal(head, self.max_bytes, self.server)
        if answer is not None:
            self._frame(answer)

    def _frame(self, frame: bytes) -> None:
        if self.discard or not frame.strip():
            return
        if self.channel is not None:
            complete = self.channel.match(frame)
            if complete is not None:
                if self.queued:
                    # Frames before it wait for the session (a log message of this call): wake the call after them.
                    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        self.queue.send_nowait(complete)
                        self.queued += 1
                        return
                complete()
                return
        try:
            item: _Item = SessionMessage(types.jsonrpc_message_adapter.validate_json(frame, by_name=False))
        except ValueError as exc:
            item = answer_to_frame(frame, self.server) or exc
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.queue.send_nowait(item)
            self.queued += 1

    def _pause_reading(self, paused: bool) -> None:
        pipe = cast("asyncio.ReadTransport | None", self.transport.get_pipe_transport(1) if self.transport else None)
        if pipe is None or pipe.is_closing():
            return
        self._paused_reading = paused
        if paused:
            pipe.pause_reading()
        else:
            pipe.resume_reading()

    def caught_up(self) -> None:
        """The session took a frame: read on once the queue is short again."""
        self.queued -= 1
        if self._paused_reading and (self.discard or self.queued < READ_AHEAD // 2):
            self._pause_reading(False)

    # -- writing ----------------------------------------------------------------------------------------------------

    def _wake_writers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def write(self, line: bytes) -> None:
        """Put one whole line on the server's stdin (raises ``BrokenResourceError`` once the pipe is gone)."""
        pipe = cast("asyncio.WriteTransport | None", self.transport.get_pipe_transport(0) if self.transport else None)
        if self.stdin_lost or pipe is None or pipe.is_closing():
            raise anyio.BrokenResourceError("the server's stdin is closed")
        pipe.write(line)

    async def drain(self) -> None:
        """Wait while the stdin pipe's buffer is over its high-water mark."""
        while self._paused_writing and not self.stdin_lost:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter

    @property
    def returncode(self) -> int | None:
        return self.transport.get_returncode() if self.transport is not None else None


class _Reader:
    """The session's read stream: the queued frames, telling the wire when it may read on."""

    def __init__(self, wire: _Wire, inner: MemoryObjectReceiveStream[_Item]) -> None:
        self._wire = wire
        self._inner = inner

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            self._wire.caught_up()
            if isinstance(item, SessionMessage | Exception):
                return item
            item()  # a raw-channel answer queued behind frames the session has now read

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        self._inner.close()

    def __aiter__(self) -> _Reader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Reader:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Writer:
    """The session's write stream: each message dumped and written onto stdin, no task in between."""

    def __init__(self, wire: _Wire, on_broken: Callable[[], None]) -> None:
        self._wire = wire
        self._on_broken = on_broken
        self.closed = False

    async def send(self, item: SessionMessage, /) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
        try:
            self._wire.write(data)
        except anyio.BrokenResourceError:
            self._on_broken()  # as the SDK does: the session sees the connection end instead of waiting forever
            raise
        await self._wire.drain()

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> _Writer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@dataclass(frozen=True)
class Launch:
    """What to run: the command line, extra environment (over the SDK's safe defaults) and working directory."""

    command: str
    args: list[str]
    env: Mapping[str, str] | None = None
    cwd: str | None = None


class PipeTransport:
    """An ``mcp.Client`` transport running one server as a subprocess on event-loop pipes.

    ``launch`` is entered for every start and yields the command line (a sandbox plan wraps it, and is released on
    exit, after the process ended); stderr is appended to ``log_path`` (a :class:`LineLog`: through ``redact`` when
    given, rotated at ``log_max_bytes``, ``log_backups`` old files kept). :meth:`bind`
    hands the transport the connection's raw channel before it is entered: the channel's requests are then written
    by it and their answers resolved in its read callback.
    """

    def __init__(
        self,
        launch: Callable[[], AbstractAsyncContextManager[Launch]],
        log_path: Path,
        redact: Callable[[str], str] | None = None,
        *,
        log_max_bytes: int = 0,
        log_backups: int = 2,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        name: str | None = None,
    ) -> None:
        self.launch = launch
        self.name = name or log_path.stem
        """The server's name in errors and logs."""
        self.log_path = log_path
        self.redact = redact
        """Applied to each stderr line before it reaches ``log_path`` (``None``: written as it came)."""
        self.log_max_bytes = log_max_bytes
        self.log_backups = log_backups
        self.max_message_bytes = max_message_bytes
        """A message on stdout longer than this is dropped (0: no cap); see :class:`_Wire`."""
        self.channel: RawChannel | None = None
        self.pid: int | None = None
        """The server's process id once it runs (its process group's too)."""
        self._run: contextlib.AbstractAsyncContextManager[tuple[_Reader, _Writer]] | None = None

    def bind(self, channel: RawChannel) -> None:
        """Serve ``channel``'s requests on this transport's pipes."""
        self.channel = channel

    async def __aenter__(self) -> tuple[_Reader, _Writer]:
        self._run = _run(self)
        return await self._run.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._run is not None
        return await self._run.__aexit__(exc_type, exc, tb)


@asynccontextmanager
async def _run(spec: PipeTransport) -> AsyncIterator[tuple[_Reader, _Writer]]:
    async with spec.launch() as launch:
        log = LineLog(spec.log_path, spec.redact, max_bytes=spec.log_max_bytes, backups=spec.log_backups)
        try:
            async with _spawned(launch, log, spec) as streams:
                yield streams
        finally:
            log.close()


@asynccontextmanager
async def _spawned(launch: Launch, log: LineLog, spec: PipeTransport) -> AsyncIterator[tuple[_Reader, _Writer]]:
    channel = spec.channel
    loop = asyncio.get_running_loop()
    send, receive = anyio.create_memory_object_stream[_Item](math.inf)
    wire = _Wire(channel, send, spec.max_message_bytes, spec.name)
    wire.stderr = log
    env = get_default_environment() | dict(launch.env or {})
    transport, _ = await loop.subprocess_exec(
        lambda: wire,
        launch.command,
        *launch.args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=launch.cwd,
        start_new_session=True,
        preexec_fn=_parent_death_signal(),
    )
    # From here no await before the try: a cancellation in the gap would leak the live process.
    spec.pid = transport.get_pid()
    reader = _Reader(wire, receive)
    writer = _Writer(wire, on_broken=send.close)
    if channel is not None:
        channel.attach_raw(wire.write, wire.drain)
    try:
        yield reader, writer
    finally:
        with anyio.CancelScope(shield=True):
            await _shutdown(transport, wire, reader, writer)
    await anyio.lowlevel.cancel_shielded_checkpoint()


async def _shutdown(transport: asyncio.SubprocessTransport, wire: _Wire, reader: _Reader, writer: _Writer) -> None:
    """Stop the session's traffic, stop the server (bounded at every step), release the pipes."""
    wire.discard = True
    reader.close()
    wire.caught_up()  # a server blocked writing stdout must be drained to reach its exit
    await writer.aclose()
    with anyio.move_on_after(FLUSH_TIMEOUT):
        await wire.drain()
    if wire.channel is not None:
        wire.channel.close()
    stdin = transport.get_pipe_transport(0)
    if stdin is not None:
        stdin.close()
    if not await _exited(wire, PROCESS_TERMINATION_TIMEOUT):
        await _kill_group(transport.get_pid(), wire)
        if not await _exited(wire, REAP_TIMEOUT):
            logger.warning("server process %d is still alive after SIGKILL; abandoning it", transport.get_pid())
    with anyio.move_on_after(FLUSH_TIMEOUT):  # what the server wrote last (often why it died) may still be in the pipe
        await wire.stderr_closed.wait()
    with contextlib.suppress(PermissionError):  # re-killing a setuid child on close
        transport.close()


async def _exited(wire: _Wire, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        await wire.exited.wait()
    return wire.exited.is_set() or wire.returncode is not None


async def _kill_group(pgid: int, wire: _Wire) -> None:
    """SIGTERM the server's process group, SIGKILL what is left after ``FORCE_KILL_TIMEOUT``."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:
        logger.warning("no permission to signal some of process group %d; waiting for it anyway", pgid)
    with anyio.move_on_after(FORCE_KILL_TIMEOUT):
        while _group_alive(pgid):  # noqa: ASYNC110 - a process group signals nothing when it empties
            await anyio.sleep(_POLL)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
