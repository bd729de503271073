"""Shared helpers for the benchmarks: statistics, machine facts, result files and process CPU accounting."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import pstats
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

IDLE = "(idle: epoll wait)"
REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PYTHON = sys.executable
FIXTURE = ("-m", "tests.fixtures.downstream", "ok")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of already sorted values, linearly interpolated."""
    if not sorted_values:
        return float("nan")
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    rank = (len(sorted_values) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return float(sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low))


def summarize_ns(samples_ns: Iterable[int]) -> dict[str, float]:
    """p50/p90/p95/p99/min/max/mean of nanosecond samples, in milliseconds."""
    values = sorted(s / 1e6 for s in samples_ns)
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50), 4),
        "p90_ms": round(percentile(values, 90), 4),
        "p95_ms": round(percentile(values, 95), 4),
        "p99_ms": round(percentile(values, 99), 4),
        "min_ms": round(values[0], 4),
        "max_ms": round(values[-1], 4),
        "mean_ms": round(sum(values) / len(values), 4),
    }


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_info() -> dict[str, Any]:
    """Facts about the machine and the software under test, recorded with every result."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": _cpu_model(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "mcp": _version("mcp"),
        "mcp_types": _version("mcp-types"),
        "pydantic": _version("pydantic"),
        "uvicorn": _version("uvicorn"),
        "httpx2": _version("httpx2"),
        "hanzo_hub": _version("hanzo-hub"),
        "git_commit": _git_commit(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_results(name: str, data: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """Write ``bench/results/<name>.json`` and ``<name>.md`` (through temporary files, so a crash leaves no half)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    paths = (RESULTS / f"{name}.json", RESULTS / f"{name}.md")
    for path, text in zip(paths, (json.dumps(data, indent=2, sort_keys=False) + "\n", markdown), strict=True):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return paths


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.0f}" if abs(value) >= 1000 else f"{value:.1f}"
    return str(value)


def machine_line(info: dict[str, Any]) -> str:
    """One markdown line describing the machine."""
    return (
        f"Machine: {info['cpus_usable']} CPUs ({info['cpu_model']}), Python {info['python']}, mcp {info['mcp']}, "
        f"hanzo-hub {info['hanzo_hub']} @ {info['git_commit']}, load at start {info['loadavg_at_start']}, "
        f"{info['timestamp']}.\n"
    )


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and all its live descendants (0 for processes already gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def find_descendant(cmd_fragment: str) -> int | None:
    """The pid of the topmost descendant of this process whose command line contains ``cmd_fragment``."""
    import psutil

    matches: dict[int, int] = {}
    for proc in psutil.Process().children(recursive=True):
        try:
            if cmd_fragment in " ".join(proc.cmdline()):
                matches[proc.pid] = proc.ppid()
        except psutil.Error:
            continue
    tops = [pid for pid, parent in matches.items() if parent not in matches]
    return tops[0] if tops else None


def write_config(path: Path, servers: dict[str, Any], **sections: Any) -> Path:
    """A hub config file with ``mcpServers`` (Claude format) and optional hub sections."""
    path.write_text(json.dumps({"mcpServers": servers, **sections}, indent=1), encoding="utf-8")
    return path


def fixture_server(name: str) -> dict[str, Any]:
    """The ``mcpServers`` entry that launches the fixture downstream over stdio."""
    return {"command": PYTHON, "args": [*FIXTURE, name], "cwd": str(REPO)}


def hub_args(config: Path, home: Path, *extra: str) -> list[str]:
    """Arguments of ``python -m hanzo_hub serve``."""
    return ["-m", "hanzo_hub", "serve", "--config", str(config), "--home", str(home), *extra]


def ratio(a: float, b: float) -> float:
    """``a / b`` rounded, NaN-safe."""
    return round(a / b, 3) if b else float("nan")


class RawStdio:
    """A minimal newline-delimited JSON-RPC client over a child's stdin/stdout (no SDK on the client side)."""

    def __init__(self, argv: Sequence[str], *, stderr: Any = subprocess.DEVNULL, env: dict[str, str] | None = None):
        self.spawned_ns = time.perf_counter_ns()
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=REPO, env=env
        )  # buffered: an unbuffered readline reads one byte per system call, seconds for a 1.5 MB tools/list
        self._next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int | None:
        """Write one request (or notification); returns its id."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        request_id = None
        if not notify:
            self._next_id += 1
            request_id = message["id"] = self._next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self.proc.stdin.flush()
        return request_id

    def receive(self, request_id: int) -> dict[str, Any]:
        """Read lines until the response to ``request_id`` arrives (notifications are skipped)."""
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError(f"server exited (rc={self.proc.poll()}) before answering request {request_id}")
            message = json.loads(line)
            if message.get("id") == request_id:
                return message  # type: ignore[no-any-return]

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and wait for its response."""
        request_id = self.send(method, params)
        assert request_id is not None
        return self.receive(request_id)

    def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        """The handshake-era ``initialize`` + ``notifications/initialized``."""
        reply = self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "hanzo-bench", "version": "0"}},
        )
        self.send("notifications/initialized", notify=True)
        return reply

    def close(self, wait: float = 30.0) -> int | None:
        """Close stdin and wait for the child to exit by itself, killing it after ``wait`` seconds."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            return self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class LoadMeter:
    """How busy the machine was while a benchmark ran, split into this benchmark's processes and everyone else's."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self._t0 = time.monotonic()
        self._sys0 = self._busy()
        self._ours0 = tree_cpu_seconds(os.getpid())

    def _busy(self) -> float:
        t = self._psutil.cpu_times()
        return float(t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0))

    def read(self) -> dict[str, float]:
        """Average cores in use since construction: by everything, by this benchmark's process tree, by others."""
        wall = time.monotonic() - self._t0
        busy = self._busy() - self._sys0
        ours = tree_cpu_seconds(os.getpid()) - self._ours0
        return {
            "wall_s": round(wall, 2),
            "busy_cores": round(busy / wall, 2),
            "bench_cores": round(ours / wall, 2),
            "other_cores": round(max(busy - ours, 0.0) / wall, 2),
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        }


def _group(func: tuple[str, int, str]) -> str:
    """The package a profiled function belongs to (C functions by what they are)."""
    filename, _line, name = func
    if filename == "~":
        if "epoll" in name or "select" in name:
            return IDLE
        if "pydantic_core" in name:
            return "pydantic_core"
        return "builtins"
    if "/site-packages/" in filename:
        return filename.split("/site-packages/", 1)[1].split("/", 1)[0]
    if "/hanzo_hub/" in filename:
        return "hanzo_hub"
    match = re.search(r"/lib/python3\.\d+/([^/]+)", filename)
    if match:
        return "stdlib:" + match.group(1).removesuffix(".py")
    return filename


def summarize_profile(path: Path, requests: int) -> dict[str, Any]:
    """Per-request costs from a cProfile dump: by package, top functions by self time, hanzo_hub functions."""
    stats: Any = pstats.Stats(str(path))
    groups: dict[str, float] = {}
    rows = []
    for func, (_cc, nc, tt, ct, _callers) in stats.stats.items():
        group = _group(func)
        groups[group] = groups.get(group, 0.0) + tt
        rows.append({"function": pstats.func_std_string(func), "group": group, "calls": nc, "tt": tt, "ct": ct})
    idle = groups.get(IDLE, 0.0)
    busy = sum(groups.values()) - idle
    top = sorted((r for r in rows if r["group"] != IDLE), key=lambda r: r["tt"], reverse=True)
    ours = sorted((r for r in rows if r["group"] == "hanzo_hub"), key=lambda r: r["ct"], reverse=True)

    def per_request(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "function": row["function"],
            "calls_per_request": round(row["calls"] / requests, 2),
            "self_us_per_request": round(row["tt"] / requests * 1e6, 1),
            "cum_us_per_request": round(row["ct"] / requests * 1e6, 1),
        }

    return {
        "requests": requests,
        "busy_us_per_request": round(busy / requests * 1e6, 1),
        "by_package_us_per_request": {
            g: round(t / requests * 1e6, 1) for g, t in sorted(groups.items(), key=lambda kv: kv[1], reverse=True)
        },
        "top_self_time": [per_request(r) for r in top[:30]],
        "hanzo_hub_functions": [per_request(r) for r in ours[:15]],
    }
