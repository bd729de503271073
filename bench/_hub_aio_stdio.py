"""Prototype of a proposed fix: the real hub (``Hub.open`` + ``build_server``) served over non-blocking asyncio pipes.

``python bench/_hub_aio_stdio.py CONFIG HOME [--raw-calls]``. ``hanzo_hub serve`` reads stdin in a thread and the SDK's
``stdio_server`` writes and flushes stdout through anyio worker threads, so every message crosses threads two or
three times; on a loaded 2-core machine each crossing waits for the scheduler. Here fd 0 and fd 1 are registered
with the event loop instead (``connect_read_pipe`` / ``connect_write_pipe``), with the same descriptor diversion as
the SDK (handlers that print cannot corrupt the protocol). Everything else is the hub as shipped, so
``proxy_overhead`` can show what the transport alone costs. Works when stdin/stdout are pipes or sockets. With
``--raw-calls`` it also installs ``_hub_raw_relay``'s ``tools/call`` fast path (both proposed fixes together).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from hanzo_hub.config import load_settings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server, initialization_options

LINE_LIMIT = 64 * 1024 * 1024


@asynccontextmanager
async def asyncio_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """Read and write streams like ``mcp.server.stdio.stdio_server``'s, on the event loop instead of threads."""
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # stray reads see EOF, stray prints go to stderr, as with the SDK's transport
    os.dup2(2, 1)
    os.close(null)
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
    )
    write_transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    read_send, read_receive = create_context_streams[SessionMessage | Exception](0)
    write_send, write_receive = create_context_streams[SessionMessage](0)

    async def pump_in() -> None:
        async with read_send:
            while line := await reader.readline():
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:
                    await read_send.send(exc)
                    continue
                await read_send.send(SessionMessage(message))

    async def pump_out() -> None:
        async with write_receive:
            async for session_message in write_receive:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                writer.write(data.encode() + b"\n")
                await writer.drain()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_in)
            tg.start_soon(pump_out)
            yield read_receive, write_send
            tg.cancel_scope.cancel()
    finally:
        read_transport.close()
        write_transport.close()


async def serve(config: Path, home: Path, raw_calls: bool) -> None:
    settings = load_settings(config, home=home, log_level="WARNING")
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        if raw_calls:
            from _hub_raw_relay import raw_tools_call

            server.middleware.append(raw_tools_call(hub))
        async with asyncio_stdio() as (read, write):
            await server.run(read, write, initialization_options(server))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    anyio.run(serve, Path(sys.argv[1]), Path(sys.argv[2]), "--raw-calls" in sys.argv[3:])
