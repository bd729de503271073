"""The cheapest possible stdio proxy: copies JSON-RPC lines between its stdio and one child, parsing nothing.

``python bench/_pipe_relay.py CMD [ARGS...]``. With one client, request ids need no rewriting, so every line is
passed on unchanged. No real proxy can be cheaper than this: it is the floor that the extra process and the two
extra pipe hops of any stdio proxy impose, against which ``proxy_overhead``'s 1.3x target can be judged.
"""

from __future__ import annotations

import asyncio
import sys


async def _pump(reader: asyncio.StreamReader, write: object) -> None:
    while line := await reader.readline():
        write(line)  # type: ignore[operator]


async def main(argv: list[str]) -> None:
    loop = asyncio.get_running_loop()
    child = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 24
    )
    assert child.stdin is not None
    assert child.stdout is not None
    stdin = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    out_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    down = asyncio.ensure_future(_pump(stdin, child.stdin.write))
    up = asyncio.ensure_future(_pump(child.stdout, out_transport.write))
    await down
    child.stdin.close()
    await up
    await child.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
