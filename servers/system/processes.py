"""Process tools: list, details, tree, open files, resource limits, and a kill restricted to the server's own user."""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Annotated, Any, Literal

import psutil
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.system._util import READ_ONLY, off_loop, rounded

__all__ = ["register"]

Pid = Annotated[int, Field(ge=1, le=2**22, description="process id")]
SortKey = Literal["cpu", "memory", "pid", "name", "started"]
SIGNALS: dict[str, signal.Signals] = {
    "TERM": signal.SIGTERM,
    "KILL": signal.SIGKILL,
    "INT": signal.SIGINT,
    "HUP": signal.SIGHUP,
    "USR1": signal.SIGUSR1,
    "USR2": signal.SIGUSR2,
}
RLIMITS = {name[7:].lower(): getattr(psutil, name) for name in dir(psutil) if name.startswith("RLIMIT_")}
KILL_WAIT_SECONDS = 3.0


def _proc(pid: int) -> psutil.Process:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess as exc:
        raise ToolError(f"no process with pid {pid}; list processes with process_list") from exc


def _started(p: psutil.Process) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(p.create_time()))


def _list(name: str | None, user: str | None, sort: SortKey, limit: int) -> list[list[Any]]:
    pattern = re.compile(name, re.I) if name else None
    rows = []
    attrs = ["pid", "ppid", "name", "username", "status", "cpu_percent", "memory_info", "create_time", "cmdline"]
    for p in psutil.process_iter(attrs):
        info = p.info
        cmdline = " ".join(info["cmdline"] or [])
        if pattern and not (pattern.search(info["name"] or "") or pattern.search(cmdline)):
            continue
        if user and info["username"] != user:
            continue
        rss = info["memory_info"].rss if info["memory_info"] else 0
        rows.append([info["pid"], info["ppid"], info["name"], info["username"], info["status"],
                     rounded(info["cpu_percent"] or 0.0), rss, info["create_time"] or 0.0, cmdline[:200]])  # fmt: skip
    index = {"cpu": 5, "memory": 6, "pid": 0, "name": 2, "started": 7}[sort]
    rows.sort(key=lambda r: (r[index] is None, r[index]), reverse=sort in ("cpu", "memory", "started"))
    for row in rows:
        row[7] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(row[7]))
    return rows[:limit]


def _info(pid: int) -> dict[str, Any]:
    p = _proc(pid)
    with p.oneshot():
        info: dict[str, Any] = {
            "pid": p.pid,
            "ppid": p.ppid(),
            "name": p.name(),
            "status": p.status(),
            "started": _started(p),
            "username": p.username(),
            "uids": p.uids()._asdict(),
            "num_threads": p.num_threads(),
            "memory": p.memory_info()._asdict(),
            "cpu_times": p.cpu_times()._asdict(),
            "nice": p.nice(),
        }
        for key, getter in (("exe", p.exe), ("cwd", p.cwd), ("cmdline", p.cmdline), ("num_fds", p.num_fds)):
            try:
                info[key] = getter()
            except (psutil.AccessDenied, psutil.ZombieProcess):
                info[key] = None
    return info


def _tree(pid: int, depth: int) -> dict[str, Any]:
    def node(p: psutil.Process, level: int) -> dict[str, Any]:
        try:
            entry: dict[str, Any] = {"pid": p.pid, "name": p.name(), "status": p.status()}
            children = p.children() if level < depth else []
        except psutil.NoSuchProcess:
            return {"pid": p.pid, "gone": True}
        entry["children"] = [node(c, level + 1) for c in children]
        return entry

    return node(_proc(pid), 0)


def _kill(pid: int, sig: str) -> dict[str, Any]:
    if pid == os.getpid():
        raise ToolError("refusing to signal this server's own process")
    p = _proc(pid)
    if p.uids().real != os.getuid():
        raise ToolError(f"pid {pid} belongs to another user (uid {p.uids().real}); only own processes can be signalled")
    name = p.name()
    try:
        p.send_signal(SIGNALS[sig])
    except psutil.AccessDenied as exc:
        raise ToolError(f"not permitted to signal pid {pid}") from exc
    exited: bool | None = None
    code = None
    if sig in ("TERM", "KILL", "INT"):
        try:
            code = p.wait(timeout=KILL_WAIT_SECONDS)
            exited = True
        except psutil.TimeoutExpired:
            exited = False
    return {"pid": pid, "name": name, "signal": f"SIG{sig}", "exited": exited, "exit_code": code}


def register(mcp: MCPServer) -> None:
    """Add the process tools to ``mcp``."""

    @mcp.tool(annotations=READ_ONLY)
    async def process_list(
        name: Annotated[str | None, Field(description="regex matched against the name or command line")] = None,
        user: Annotated[str | None, Field(description="only processes of this user name")] = None,
        sort: Annotated[SortKey, Field(description="order: cpu/memory/started descending, pid/name ascending")] = "cpu",
        limit: Annotated[int, Field(ge=1, le=2000)] = 50,
    ) -> CallToolResult:
        """List running processes (pid, ppid, name, user, status, CPU %, RSS bytes, start time, command line),
        filtered by a name/command-line regex or user and sorted. Use it to find a process id or the top consumers.
        """
        try:
            rows = await off_loop(_list, name, user, sort, limit)
        except re.error as exc:
            raise ToolError(f"invalid name regex: {exc}") from exc
        columns = ["pid", "ppid", "name", "user", "status", "cpu_percent", "rss_bytes", "started", "cmdline"]
        return table_result(columns, rows, title="processes")

    @mcp.tool(annotations=READ_ONLY)
    async def process_info(pid: Pid) -> CallToolResult:
        """Details of one process: command line, executable, cwd, user and uids, status, threads, open fd count,
        memory (rss/vms) and CPU times. Fields the server may not read are null.
        """
        return json_result(await off_loop(_info, pid))

    @mcp.tool(annotations=READ_ONLY)
    async def process_tree(
        pid: Annotated[int, Field(ge=1, description="root of the tree (1 for the whole system)")] = 1,
        depth: Annotated[int, Field(ge=1, le=20, description="levels of children to follow")] = 5,
    ) -> CallToolResult:
        """The tree of children under ``pid`` as nested {pid, name, status, children}. Use it to see what a service
        or shell spawned, or which workers a supervisor runs.
        """
        return json_result(await off_loop(_tree, pid, depth))

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False,
                                          openWorldHint=False))  # fmt: skip
    async def process_kill(
        pid: Pid,
        sig: Annotated[Literal["TERM", "KILL", "INT", "HUP", "USR1", "USR2"], Field(description="signal")] = "TERM",
    ) -> CallToolResult:
        """Send a signal to a process owned by this server's own user (never another user's, never the server
        itself). For TERM/KILL/INT waits up to 3 s and reports whether it exited and its exit code.
        """
        return json_result(await off_loop(_kill, pid, sig))

    @mcp.tool(annotations=READ_ONLY)
    async def process_open_files(pid: Pid) -> CallToolResult:
        """Regular files a process has open (path, fd, mode, position). Use it to find who holds a log or lock file."""

        def collect() -> list[list[Any]]:
            try:
                return [[f.fd, f.path, getattr(f, "mode", None), getattr(f, "position", None)]
                        for f in _proc(pid).open_files()]  # fmt: skip
            except psutil.AccessDenied as exc:
                raise ToolError(f"not permitted to inspect the files of pid {pid}") from exc

        return table_result(["fd", "path", "mode", "position"], await off_loop(collect), title=f"open files of {pid}")

    @mcp.tool(annotations=READ_ONLY)
    async def process_rlimits(pid: Pid) -> CallToolResult:
        """Resource limits (soft/hard) of a process: open files (nofile), processes (nproc), core size, stack, address
        space... -1 means unlimited. Use it to diagnose "too many open files" and similar failures.
        """

        def collect() -> list[list[Any]]:
            p = _proc(pid)
            try:
                return [[name, *p.rlimit(code)] for name, code in sorted(RLIMITS.items())]
            except psutil.AccessDenied as exc:
                raise ToolError(f"not permitted to read the limits of pid {pid}") from exc

        return table_result(["limit", "soft", "hard"], await off_loop(collect), title=f"rlimits of {pid}")
