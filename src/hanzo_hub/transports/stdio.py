"""Serving the hub over stdin/stdout. Logs go to stderr, never stdout."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import AsyncIterator
from typing import cast

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.stdio import stdio_server

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub, freeze_startup_heap
from hanzo_hub.hub.server import build_server, initialization_options

READ_SIZE = 65536


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


async def serve_stdio(settings: HubSettings) -> None:
    """Serve until the client closes stdin or the task is cancelled; every downstream server is stopped first."""
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        freeze_startup_heap()
        stdin = cast("anyio.AsyncFile[str]", _StdinLines(sys.stdin.fileno()))
        async with stdio_server(stdin=stdin) as (read, write):
            await server.run(read, write, initialization_options(server))
