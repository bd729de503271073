"""Running one sandboxed command to completion: launcher argv, capped output, wall clock, classification, cleanup.

Shared by the bwrap and unsandboxed backends. Whatever the command started is killed before ``run_process``
returns: its process group, then everything left in its cgroup.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from hanzo_hub.errors import SandboxStartFailed
from hanzo_hub.sandbox.base import LimitName, Limits, RunResult
from hanzo_hub.sandbox.cgroup import Cgroup

__all__ = ["LAUNCHER", "launcher_argv", "run_process"]

LAUNCHER = str(Path(__file__).with_name("_launcher.py"))
KILL_GRACE = 2.0
"""Seconds to wait for a killed process to be reaped."""


def launcher_argv(
    limits: Limits, cgroup: Cgroup | None, *, setsid: bool, env_keep: Sequence[str] | None = None
) -> list[str]:
    """The exec-shim prefix that joins ``cgroup`` and applies ``limits`` as rlimits.

    ``env_keep``: the only environment variables (names) the command may inherit; the launching process may have
    added others (jupyter's ``JPY_PARENT_PID``, which makes a kernel in a pid namespace think its parent died).
    """
    argv = [sys.executable, "-I", "-S", LAUNCHER]
    for procs in cgroup.procs_files if cgroup is not None else ():
        argv += ["--cg", str(procs)]
    cpu = limits.effective_cpu_seconds
    if cpu is not None:
        argv += ["--rl", f"cpu={cpu}"]
    if limits.file_size_bytes is not None:
        argv += ["--rl", f"fsize={limits.file_size_bytes}"]
    if limits.memory_bytes is not None and (cgroup is None or "memory" not in cgroup.dirs):
        argv += ["--rl", f"as={limits.memory_bytes}"]  # no memory cgroup: address-space cap instead
    argv += ["--rl", "core=0"]
    if setsid:
        argv.append("--setsid")
    if env_keep is not None:
        argv += ["--env-keep", ",".join(sorted(env_keep))]
    return [*argv, "--"]


async def _drain(stream: ByteReceiveStream | None, sink: bytearray, cap: int, flags: dict[str, bool]) -> None:
    if stream is None:
        return
    async for chunk in stream:
        room = cap - len(sink)
        if room > 0:
            sink += chunk[:room]
        if len(chunk) > room:
            flags["truncated"] = True


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


def _classify(code: int, timed_out: bool, cgroup: Cgroup | None, stderr: bytes) -> LimitName | None:
    signum = code - 128 if code > 128 else 0
    if timed_out:
        return "wall"
    if cgroup is not None and cgroup.oom_killed():
        return "memory"
    if signum == signal.SIGXCPU:
        return "cpu"
    if signum == signal.SIGXFSZ:
        return "file_size"
    if code != 0 and cgroup is not None and cgroup.pids_exhausted():
        return "pids"
    if code != 0 and (cgroup is None or "memory" not in cgroup.dirs) and b"MemoryError" in stderr:
        return "memory"
    return None


async def run_process(
    argv: Sequence[str],
    limits: Limits,
    *,
    env: Mapping[str, str],
    cwd: str | None,
    stdin: bytes | None,
    cgroup: Cgroup | None,
) -> RunResult:
    """Run ``argv`` (already wrapped by the backend) under ``limits``; destroys ``cgroup`` afterwards.

    Raises:
        SandboxStartFailed: the process could not be spawned.
    """
    started = time.perf_counter()
    out, err = bytearray(), bytearray()
    flags = {"truncated": False}
    timed_out = False
    try:
        try:
            process = await anyio.open_process(
                list(argv),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise SandboxStartFailed(f"cannot start {argv[0]}: {exc.strerror}") from exc
        try:
            with anyio.move_on_after(limits.wall_seconds) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, process.stdout, out, limits.output_bytes, flags)
                    tg.start_soon(_drain, process.stderr, err, limits.output_bytes, flags)
                    if process.stdin is not None:
                        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                            await process.stdin.send(stdin or b"")
                        await process.stdin.aclose()
                    await process.wait()
                    # the leader is gone: kill what it left behind so inherited pipes close and the drains end
                    _kill_group(process)
                    if cgroup is not None:
                        cgroup.kill_all()
            timed_out = scope.cancelled_caught
        finally:
            with anyio.CancelScope(shield=True):
                _kill_group(process)
                if cgroup is not None:
                    cgroup.kill_all()
                with anyio.move_on_after(KILL_GRACE):
                    await process.wait()
                await process.aclose()
        raw = process.returncode
        code = 128 - raw if raw is not None and raw < 0 else raw
        limit = _classify(code if code is not None else 137, timed_out, cgroup, bytes(err))
        if limit is None and flags["truncated"]:
            limit = "output"
        return RunResult(
            exit_code=code,
            stdout=bytes(out),
            stderr=bytes(err),
            limit=limit,
            duration=time.perf_counter() - started,
            truncated=flags["truncated"],
        )
    finally:
        if cgroup is not None:
            with anyio.CancelScope(shield=True):
                await cgroup.destroy()
