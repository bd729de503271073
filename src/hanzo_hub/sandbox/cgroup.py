"""Per-run cgroups for memory, CPU and pids: v2 (unified, delegated subtree) or v1 (one hierarchy per controller).

Detection happens at run time from ``/proc/self/cgroup`` and the mounts under ``/sys/fs/cgroup``. A v1 child is made
under the caller's own cgroup in each of the ``memory``, ``cpu`` and ``pids`` hierarchies; a v2 child under the
configured delegated subtree (or the caller's own cgroup when its ``cgroup.subtree_control`` already enables the
controllers). When neither is writable, ``CgroupFactory.create`` returns ``None`` and callers fall back to rlimits.

The process joins through the launcher (``--cg <cgroup.procs>``), before it execs anything. ``Cgroup.destroy``
kills whatever is left inside and removes the directories.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import anyio

__all__ = ["CGROUP_MOUNT", "Cgroup", "CgroupFactory"]

logger = logging.getLogger(__name__)

CGROUP_MOUNT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
DESTROY_ATTEMPTS = 50


@dataclass
class Cgroup:
    """One per-run cgroup: a directory per hierarchy (one for v2, up to three for v1)."""

    version: int
    dirs: dict[str, Path] = field(default_factory=dict)

    @property
    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files the launcher writes its pid to."""
        return [d / "cgroup.procs" for d in dict.fromkeys(self.dirs.values())]

    def pids(self) -> set[int]:
        """Every process currently inside."""
        found: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError):
                found.update(int(line) for line in procs.read_text().split())
        return found

    def oom_killed(self) -> bool:
        """Whether the memory limit killed something (v2 ``memory.events``, v1 ``memory.oom_control``)."""
        memory = self.dirs.get("memory")
        if memory is None:
            return False
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _counter(memory / name, "oom_kill") > 0

    def pids_exhausted(self) -> bool:
        """Whether a fork was refused by ``pids.max``."""
        pids = self.dirs.get("pids")
        return pids is not None and _counter(pids / "pids.events", "max") > 0

    def kill_all(self) -> None:
        """SIGKILL everything inside (v2 ``cgroup.kill`` when present, else pid by pid)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.dirs["memory" if "memory" in self.dirs else next(iter(self.dirs))] / "cgroup.kill").write_text(
                    "1"
                )
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    async def destroy(self) -> None:
        """Kill the remaining processes, wait for them to leave, and remove the directories (bounded)."""
        for _ in range(DESTROY_ATTEMPTS):
            self.kill_all()
            if not self.pids():
                break
            await anyio.sleep(0.01)
        for path in dict.fromkeys(self.dirs.values()):
            for _ in range(DESTROY_ATTEMPTS):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    await anyio.sleep(0.01)
            else:
                logger.warning("cgroup %s could not be removed", path)


def _counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """Map each controller (and ``""`` for v2) to this process's cgroup path."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(","):
            paths[controller] = parts[2]
    return paths


class CgroupFactory:
    """Finds a writable cgroup setup once, then creates one cgroup per run.

    ``mount`` and ``proc_cgroup`` are injectable so the file layout of either version can be exercised in tests.
    """

    def __init__(
        self, *, mount: Path = CGROUP_MOUNT, proc_cgroup: str | None = None, v2_root: Path | None = None
    ) -> None:
        self._mount = mount
        if proc_cgroup is None:
            try:
                proc_cgroup = Path("/proc/self/cgroup").read_text()
            except OSError:
                proc_cgroup = ""
        own = _own_paths(proc_cgroup)
        self.version, self._bases, self.reason = self._detect(own, v2_root)

    def _detect(self, own: dict[str, str], v2_root: Path | None) -> tuple[int, dict[str, Path], str]:
        unified = self._mount if (self._mount / "cgroup.controllers").exists() else self._mount / "unified"
        if v2_root is not None or (unified / "cgroup.controllers").exists():
            base = v2_root or unified / own.get("", "/").lstrip("/")
            enabled = _read_words(base / "cgroup.subtree_control")
            if {"memory", "pids"} <= enabled and os.access(base, os.W_OK):
                return (
                    2,
                    dict.fromkeys(("memory", "cpu", "pids"), base)
                    if "cpu" in enabled
                    else {
                        "memory": base,
                        "pids": base,
                    },
                    "",
                )
        bases: dict[str, Path] = {}
        for controller in ("memory", "cpu", "pids"):
            root = self._mount / controller
            if controller in own and (root / "cgroup.procs").exists():
                base = root / own[controller].lstrip("/")
                if os.access(base, os.W_OK):
                    bases[controller] = base
        if bases:
            return 1, bases, ""
        return 0, {}, "no writable cgroup (v2 needs a delegated subtree with memory and pids enabled)"

    @property
    def available(self) -> bool:
        """Whether per-run cgroups can be made."""
        return self.version != 0

    def create(self, *, memory_bytes: int | None, cpus: float | None, pids: int | None) -> Cgroup | None:
        """Make and configure a fresh cgroup, or return ``None`` when none can be made (rlimits only).

        Raises:
            OSError: the directory was made but a limit could not be written (it is removed first).
        """
        if not self.available:
            return None
        group = Cgroup(self.version)
        name = f"hanzo-sbx-{uuid.uuid4().hex[:12]}"
        try:
            for controller, base in self._bases.items():
                path = base / name
                if path not in group.dirs.values():
                    path.mkdir()
                group.dirs[controller] = path
            self._configure(group, memory_bytes=memory_bytes, cpus=cpus, pids=pids)
        except OSError:
            for path in dict.fromkeys(group.dirs.values()):
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise
        return group

    def _configure(self, group: Cgroup, *, memory_bytes: int | None, cpus: float | None, pids: int | None) -> None:
        d = group.dirs
        if group.version == 2:
            if memory_bytes is not None:
                (d["memory"] / "memory.max").write_text(str(memory_bytes))
                _try_write(d["memory"] / "memory.swap.max", "0")
            if cpus is not None and "cpu" in d:
                (d["cpu"] / "cpu.max").write_text(f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
            if pids is not None:
                (d["pids"] / "pids.max").write_text(str(pids))
            return
        if memory_bytes is not None and "memory" in d:
            (d["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
            _try_write(d["memory"] / "memory.memsw.limit_in_bytes", str(memory_bytes))
        if cpus is not None and "cpu" in d:
            (d["cpu"] / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (d["cpu"] / "cpu.cfs_quota_us").write_text(str(int(cpus * CPU_PERIOD_US)))
        if pids is not None and "pids" in d:
            (d["pids"] / "pids.max").write_text(str(pids))


def _read_words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _try_write(path: Path, value: str) -> None:
    with contextlib.suppress(OSError):
        path.write_text(value)
