"""Host tools: identity, OS release, users, CPU, load, memory, disks, cgroup limits and kernel parameters."""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import psutil
from mcp.server import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.system._util import READ_ONLY, off_loop, rounded

__all__ = ["register"]

SYSCTL_KEY = r"^[a-z0-9_]+(\.[a-z0-9_\-]+)+$"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _host_info() -> dict[str, Any]:
    boot = psutil.boot_time()
    uname = platform.uname()
    return {
        "hostname": socket.gethostname(),
        "fqdn": socket.getfqdn(),
        "system": uname.system,
        "kernel": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "python": sys.version.split()[0],
        "boot_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(boot)),
        "uptime_seconds": int(time.time() - boot),
        "cpu_count": psutil.cpu_count(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "timezone": time.tzname[0],
    }


def _os_release() -> dict[str, str]:
    for candidate in (Path("/etc/os-release"), Path("/usr/lib/os-release")):
        if candidate.is_file():
            fields: dict[str, str] = {}
            for line in candidate.read_text(encoding="utf-8", errors="replace").splitlines():
                key, sep, value = line.partition("=")
                if sep and key.strip() and not key.startswith("#"):
                    fields[key.strip()] = value.strip().strip('"')
            return fields
    raise ToolError("this machine has no /etc/os-release (not a freedesktop-style Linux)")


def _cpu_info() -> dict[str, Any]:
    freq = psutil.cpu_freq()
    model = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(errors="replace"), re.M)
        model = match.group(1).strip() if match else model
    return {
        "model": model or None,
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "frequency_mhz": {"current": rounded(freq.current), "min": rounded(freq.min), "max": rounded(freq.max)}
        if freq
        else None,
        "stats": psutil.cpu_stats()._asdict(),
    }


def _cpu_usage(interval: float, per_cpu: bool) -> dict[str, Any]:
    times = psutil.cpu_times_percent(interval=interval, percpu=False)._asdict()
    percents = psutil.cpu_percent(interval=None, percpu=True)
    return {
        "interval_seconds": interval,
        "percent": rounded(sum(percents) / max(len(percents), 1)),
        "per_cpu_percent": percents if per_cpu else None,
        "times_percent": {k: rounded(v) for k, v in times.items()},
    }


def _memory() -> dict[str, Any]:
    vm = psutil.virtual_memory()._asdict()
    swap = psutil.swap_memory()._asdict()
    return {"virtual": vm, "swap": swap}


def _cgroup_limits() -> dict[str, Any]:
    line = Path("/proc/self/cgroup").read_text().strip().splitlines()
    unified = next((entry.split("::", 1)[1] for entry in line if entry.startswith("0::")), None)
    if unified is None:
        raise ToolError("this machine does not use the unified cgroup v2 hierarchy")
    folder = CGROUP_ROOT / unified.lstrip("/")
    found: dict[str, Any] = {"cgroup": unified, "path": str(folder)}
    for name in ("memory.max", "memory.current", "memory.high", "cpu.max", "pids.max", "pids.current", "cpu.weight"):
        path = folder / name
        try:
            found[name] = path.read_text().strip()
        except OSError:
            found[name] = None
    return found


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the host tools to ``mcp``."""

    @mcp.tool(annotations=READ_ONLY)
    async def host_info() -> CallToolResult:
        """Identify this machine: hostname, FQDN, OS kernel and architecture, boot time and uptime, CPU count, total
        memory and Python version. Use it first when asked "what machine is this" or to check uptime/reboots.
        """
        return json_result(await off_loop(_host_info))

    @mcp.tool(annotations=READ_ONLY)
    async def os_release() -> CallToolResult:
        """The Linux distribution from /etc/os-release (NAME, VERSION_ID, ID, PRETTY_NAME, ...). Use it to know which
        package manager or base image matches the host.
        """
        return json_result(await off_loop(_os_release))

    @mcp.tool(annotations=READ_ONLY)
    async def users_logged_in() -> CallToolResult:
        """Users with a login session (utmp): name, terminal, remote host and login time. Empty on containers and CI
        machines without interactive logins.
        """
        users = await off_loop(psutil.users)
        rows = [
            [u.name, u.terminal, u.host, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(u.started))] for u in users
        ]
        return table_result(["user", "terminal", "host", "started"], rows, title="logged-in users")

    @mcp.tool(annotations=READ_ONLY)
    async def cpu_info() -> CallToolResult:
        """CPU model, logical/physical/usable core counts, frequency and counters (context switches, interrupts).
        Use it to size parallel jobs; ``usable_cores`` honours the CPU affinity of this server.
        """
        return json_result(await off_loop(_cpu_info))

    @mcp.tool(annotations=READ_ONLY)
    async def cpu_usage(
        interval: Annotated[float, Field(ge=0.1, le=10, description="seconds to sample over")] = 0.5,
        per_cpu: Annotated[bool, Field(description="include the utilisation of each logical CPU")] = True,
    ) -> CallToolResult:
        """Measure CPU utilisation over ``interval`` seconds: total percent, per-CPU percent and the split into
        user/system/iowait/steal... Use it to tell whether the machine is busy right now.
        """
        return json_result(await off_loop(_cpu_usage, interval, per_cpu))

    @mcp.tool(annotations=READ_ONLY)
    async def load_average() -> CallToolResult:
        """The 1/5/15-minute load averages, raw and divided by the number of logical CPUs (above 1.0 per CPU means
        work is queueing).
        """
        loads = await off_loop(psutil.getloadavg)
        cpus = psutil.cpu_count() or 1
        return json_result(
            {
                "load": dict(zip(("1m", "5m", "15m"), [rounded(v) for v in loads], strict=True)),
                "per_cpu": dict(zip(("1m", "5m", "15m"), [rounded(v / cpus) for v in loads], strict=True)),
                "cpus": cpus,
            }
        )

    @mcp.tool(annotations=READ_ONLY)
    async def memory_info() -> CallToolResult:
        """RAM and swap in bytes: total, available, used, free, percent, buffers/cached. ``available`` is what new
        processes can still get without swapping; use it (not ``free``) to judge memory pressure.
        """
        return json_result(await off_loop(_memory))

    @mcp.tool(annotations=READ_ONLY)
    async def disk_partitions(
        all_filesystems: Annotated[
            bool, Field(description="also list pseudo filesystems (proc, tmpfs, overlay...)")
        ] = False,
    ) -> CallToolResult:
        """Mounted filesystems with device, mount point, type, options and usage (total/used/free bytes, percent).
        Use it to find which mount is filling up.
        """

        def collect() -> list[list[Any]]:
            rows = []
            for part in psutil.disk_partitions(all=all_filesystems):
                try:
                    usage = psutil.disk_usage(part.mountpoint)
                except OSError:
                    continue
                rows.append(
                    [part.device, part.mountpoint, part.fstype, part.opts, usage.total, usage.used, usage.free,
                     usage.percent]
                )  # fmt: skip
            return rows

        columns = ["device", "mountpoint", "fstype", "options", "total", "used", "free", "percent"]
        return table_result(columns, await off_loop(collect), title="mounted filesystems")

    @mcp.tool(annotations=READ_ONLY)
    async def disk_usage(
        path: Annotated[str, Field(min_length=1, description="any path on the filesystem to measure")] = "/",
    ) -> CallToolResult:
        """Total, used and free bytes and percent used of the filesystem holding ``path`` (like ``df PATH``)."""
        try:
            usage = await off_loop(psutil.disk_usage, path)
        except OSError as exc:
            raise ToolError(f"cannot stat {path!r}: {exc.strerror}; give an existing path") from exc
        return json_result({"path": path, **usage._asdict()})

    @mcp.tool(annotations=READ_ONLY)
    async def disk_io() -> CallToolResult:
        """Cumulative I/O counters per disk since boot: reads/writes, bytes, busy time. Call twice to get a rate."""
        counters = await off_loop(psutil.disk_io_counters, perdisk=True)
        rows = [
            [name, c.read_count, c.write_count, c.read_bytes, c.write_bytes, getattr(c, "busy_time", None)]
            for name, c in sorted((counters or {}).items())
        ]
        return table_result(
            ["disk", "reads", "writes", "read_bytes", "write_bytes", "busy_ms"], rows, title="disk I/O since boot"
        )

    @mcp.tool(annotations=READ_ONLY)
    async def cgroup_limits() -> CallToolResult:
        """The cgroup v2 limits that apply to this server (memory.max, cpu.max, pids.max and current usage). Inside a
        container or CI job these, not the host totals, decide how much memory and CPU a program can use.
        """
        return json_result(await off_loop(_cgroup_limits))

    @mcp.tool(annotations=READ_ONLY)
    async def sysctl_get(
        key: Annotated[str, Field(pattern=SYSCTL_KEY, description="dotted kernel parameter, e.g. vm.swappiness")],
    ) -> CallToolResult:
        """Read one kernel parameter from /proc/sys (like ``sysctl KEY``), e.g. ``net.core.somaxconn``,
        ``fs.file-max``, ``vm.overcommit_memory``. Returns the key and its value.
        """
        path = Path("/proc/sys", *key.split("."))
        try:
            value = await off_loop(path.read_text)
        except FileNotFoundError as exc:
            raise ToolError(f"no kernel parameter {key!r} (no {path}); check the spelling") from exc
        except OSError as exc:
            raise ToolError(f"cannot read {key!r}: {exc.strerror}") from exc
        return json_result({"key": key, "value": value.strip()})
