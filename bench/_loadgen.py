"""A lean MCP load generator for ``http_throughput``: raw HTTP/1.1 keep-alive connections, one process.

``python bench/_loadgen.py --port P --wire legacy|2026 --concurrency N --duration D --warmup W [--rate R]
[--client raw|httpx2]``

- ``--wire legacy``: each connection does ``initialize`` + ``notifications/initialized`` (keeping the
  ``Mcp-Session-Id`` when the server hands one out), then ``tools/call`` POSTs with ``MCP-Protocol-Version:
  2025-11-25``; answers may be SSE or JSON.
- ``--wire 2026``: self-contained 2026-07-28 POSTs (``Mcp-Method``/``Mcp-Name`` headers, protocol version, client
  info and capabilities in ``_meta``), no handshake, exactly what ``Client(mode="auto")`` sends.
- Closed loop by default (each connection sends its next call as soon as the previous answer arrives); with
  ``--rate R`` an open loop: calls are scheduled every 1/R s and each latency runs from its scheduled time, so a
  server that falls behind shows queueing delay instead of hiding it (no coordinated omission).

The client is hand-written asyncio (``--client raw``) so that on a 2-core machine it costs far less CPU than the
servers it measures; ``--client httpx2`` uses the SDK's HTTP stack instead, for comparison. The generator prints
``WARM`` when the measured window opens, ``END`` when it closes, then one JSON line of results, including its own
CPU seconds in the window.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import time
from typing import Any

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
CLIENT_INFO = {"name": "hanzo-loadgen", "version": "0"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class RawConnection:
    """One keep-alive HTTP/1.1 connection that POSTs and reads whole responses (Content-Length or chunked)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    async def post(
        self, path: str, headers: dict[str, str], body: bytes, method: str = "POST"
    ) -> tuple[int, dict[str, str], bytes]:
        if self._writer is None:
            await self._connect()
        assert self._reader is not None
        assert self._writer is not None
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self._writer.write(head.encode("latin-1") + body)
        reader = self._reader
        status_line = await reader.readline()
        if not status_line:
            self._writer = None
            raise ConnectionError("server closed the connection")
        status = int(status_line.split(b" ", 2)[1])
        response_headers: dict[str, str] = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            key, _, value = line.decode("latin-1").partition(":")
            response_headers[key.strip().lower()] = value.strip()
        if "content-length" in response_headers:
            data = await reader.readexactly(int(response_headers["content-length"]))
        elif response_headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await reader.readline()).split(b";", 1)[0], 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            data = b"".join(parts)
        else:
            data = await reader.read()
            self._writer = None
        if response_headers.get("connection", "").lower() == "close" and self._writer is not None:
            self._writer.close()
            self._writer = None
        return status, response_headers, data

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()


class Httpx2Connection:
    """The same interface on the SDK's ``httpx2`` stack (one shared keep-alive pool)."""

    def __init__(self, client: Any, base: str) -> None:
        self._client, self._base = client, base

    async def post(
        self, path: str, headers: dict[str, str], body: bytes, method: str = "POST"
    ) -> tuple[int, dict[str, str], bytes]:
        response = await self._client.request(method, self._base + path, headers=headers, content=body)
        return response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content

    async def aclose(self) -> None:
        return None


def _message(headers: dict[str, str], data: bytes, request_id: int) -> dict[str, Any] | None:
    if headers.get("content-type", "").startswith("text/event-stream"):
        for line in data.splitlines():
            if line.startswith(b"data:"):
                message = json.loads(line[5:])
                if message.get("id") == request_id:
                    return message  # type: ignore[no-any-return]
        return None
    return json.loads(data) if data else None  # type: ignore[no-any-return]


class Session:
    """One client: a connection plus the protocol state of its wire format."""

    def __init__(self, conn: Any, path: str, wire: str, tool: str, arguments: dict[str, Any]) -> None:
        self.conn, self.path, self.wire, self.tool, self.arguments = conn, path, wire, tool, arguments
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        self.next_id = 0

    async def start(self) -> None:
        if self.wire == "2026":
            self.headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": self.tool})
            return
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
        status, headers, data = await self._post("initialize", init)
        if status != 200:
            raise RuntimeError(f"initialize failed: HTTP {status} {data[:200]!r}")
        session_id = headers.get("mcp-session-id")
        if session_id:
            self.headers["Mcp-Session-Id"] = session_id
        self.headers["MCP-Protocol-Version"] = LEGACY
        body = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        await self.conn.post(self.path, self.headers, body)

    async def end(self) -> None:
        """End a handshake-era session (``DELETE``), so servers do not accumulate idle sessions between runs."""
        if "Mcp-Session-Id" in self.headers:
            with contextlib.suppress(OSError, ConnectionError, asyncio.IncompleteReadError):
                await self.conn.post(self.path, self.headers, b"", method="DELETE")
        await self.conn.aclose()

    async def _post(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()
        return await self.conn.post(self.path, self.headers, body)  # type: ignore[no-any-return]

    async def call(self) -> str | None:
        """One ``tools/call``; returns ``None`` on success, else a short description of the failure."""
        params: dict[str, Any] = {"name": self.tool, "arguments": self.arguments}
        if self.wire == "2026":
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        status, headers, data = await self._post("tools/call", params)
        message = _message(headers, data, self.next_id)
        if status != 200 or message is None or "result" not in message or message["result"].get("isError"):
            return f"HTTP {status}: {data[:160]!r}"
        return None


class Window:
    """The measured window and what happened in it."""

    def __init__(self, opts: argparse.Namespace) -> None:
        self.t0 = time.perf_counter()
        self.t_warm = self.t0 + opts.warmup
        self.t_end = self.t_warm + opts.duration
        self.samples: list[tuple[float, float]] = []  # (start or scheduled time, end time)
        self.errors: list[str] = []
        self.cpu: dict[str, float] = {}

    def record(self, start: float, failure: str | None) -> None:
        if failure is None:
            self.samples.append((start, time.perf_counter()))
        elif start >= self.t_warm:
            self.errors.append(failure)

    def mark(self, name: str) -> None:
        self.cpu[name] = _cpu()
        print(name.upper(), flush=True)


async def closed_loop(session: Session, window: Window) -> None:
    """Send the next call as soon as the previous one is answered, until the window closes."""
    while (start := time.perf_counter()) < window.t_end:
        window.record(start, await session.call())


async def open_loop(sessions: list[Session], window: Window, rate: float) -> None:
    """Schedule calls every ``1/rate`` s; free connections take them in order."""
    queue: asyncio.Queue[float | None] = asyncio.Queue()

    async def worker(session: Session) -> None:
        while (due := await queue.get()) is not None:
            window.record(due, await session.call())

    workers = [asyncio.ensure_future(worker(s)) for s in sessions]
    k = 0
    while (due := window.t0 + k / rate) < window.t_end:
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait(due)
        k += 1
    for _ in sessions:
        queue.put_nowait(None)
    await asyncio.gather(*workers)


def report(opts: argparse.Namespace, window: Window) -> dict[str, Any]:
    """The results of one run (latencies of calls started or scheduled inside the window)."""
    latencies = sorted((e - s) * 1e3 for s, e in window.samples if window.t_warm <= s < window.t_end)
    completed = sum(1 for _s, e in window.samples if window.t_warm <= e <= window.t_end)
    cpu = window.cpu.get("end", _cpu()) - window.cpu.get("warm", 0.0)

    def pct(q: float) -> float | None:
        return round(latencies[round(q / 100 * (len(latencies) - 1))], 3) if latencies else None

    return {
        "wire": opts.wire,
        "client": opts.client,
        "concurrency": opts.concurrency,
        "rate": opts.rate,
        "duration_s": opts.duration,
        "calls": completed,
        "calls_per_s": round(completed / opts.duration, 1),
        "latency_samples": len(latencies),
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "max_ms": round(latencies[-1], 3) if latencies else None,
        "mean_ms": round(sum(latencies) / len(latencies), 3) if latencies else None,
        "errors": len(window.errors),
        "first_error": window.errors[0] if window.errors else None,
        "generator_cpu_s": round(cpu, 3),
        "generator_cpu_cores": round(cpu / opts.duration, 3),
        "generator_cpu_us_per_call": round(cpu / completed * 1e6, 1) if completed else None,
        **({"latencies_ms": [round(x, 3) for x in latencies]} if opts.samples else {}),
    }


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    httpx_client = None
    if opts.client == "httpx2":
        import httpx2

        limits = httpx2.Limits(max_connections=opts.concurrency, max_keepalive_connections=opts.concurrency)
        httpx_client = httpx2.AsyncClient(limits=limits, timeout=30.0)
    base = f"http://{opts.host}:{opts.port}"
    arguments = {"text": "hello, hub"}
    sessions = [
        Session(
            Httpx2Connection(httpx_client, base) if httpx_client else RawConnection(opts.host, opts.port),
            opts.path,
            opts.wire,
            opts.tool,
            arguments,
        )
        for _ in range(opts.concurrency)
    ]
    for s in sessions:
        await s.start()
    window = Window(opts)
    loop = asyncio.get_running_loop()
    loop.call_at(loop.time() + opts.warmup, window.mark, "warm")
    loop.call_at(loop.time() + opts.warmup + opts.duration, window.mark, "end")
    if opts.rate:
        work = open_loop(sessions, window, opts.rate)
    else:
        work = asyncio.gather(*(closed_loop(s, window) for s in sessions))
    try:
        await asyncio.wait_for(work, timeout=opts.warmup + opts.duration + opts.drain)
    except TimeoutError:
        window.errors.append("calls still unanswered after the drain period")
    for s in sessions:
        await s.end()
    if httpx_client is not None:
        await httpx_client.aclose()
    return report(opts, window)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/mcp")
    parser.add_argument("--wire", choices=["legacy", "2026"], default="legacy")
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--drain", type=float, default=10.0, help="how long in-flight calls may finish after the end")
    parser.add_argument("--rate", type=float, help="open loop at this many calls/s (default: closed loop)")
    parser.add_argument("--client", choices=["raw", "httpx2"], default="raw")
    parser.add_argument("--samples", action="store_true", help="also output every latency (ms)")
    opts = parser.parse_args()
    result = asyncio.run(run(opts))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
