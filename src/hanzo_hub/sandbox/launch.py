"""Launching a long-running stdio server inside a sandbox: which backend, limits and grants, and the loaded backends.

The hub decides per server (``hub/launch.py``) whether it is sandboxed and builds a ``ServerSandbox``; the stdio
connector calls ``await sandbox.plan(argv, env, cwd)`` for every start and ``LaunchPlan.aclose()`` after the process
exited. Backends are constructed once per kind and shared (``Backends``). A backend the machine lacks raises
``SandboxUnavailable`` at every start, so that server never starts and its calls fail with the reason, while the
other servers are unaffected.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from hanzo_hub.config import SandboxSettings
from hanzo_hub.errors import SandboxUnavailable
from hanzo_hub.sandbox.base import Grants, LaunchPlan, Limits, Sandbox, aload_sandbox

__all__ = ["Backends", "ServerSandbox"]


class Backends:
    """Sandbox backends loaded on first use, one per kind; a failed load is remembered (and re-raised)."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self._loaded: dict[str, Sandbox] = {}
        self._failed: dict[str, str] = {}
        self._lock = anyio.Lock()

    async def get(self, kind: str) -> Sandbox:
        """The backend ``kind``.

        Raises:
            SandboxUnavailable: the machine lacks it (the message says why).
        """
        async with self._lock:
            if kind in self._failed:
                raise SandboxUnavailable(self._failed[kind])
            if kind not in self._loaded:
                try:
                    self._loaded[kind] = await aload_sandbox(kind, self.settings)
                except SandboxUnavailable as exc:
                    self._failed[kind] = str(exc)
                    raise
            return self._loaded[kind]

    async def aclose(self) -> None:
        """Release every loaded backend (docker clients, warm containers)."""
        loaded, self._loaded = list(self._loaded.values()), {}
        for sandbox in loaded:
            await sandbox.aclose()


@dataclass(frozen=True)
class ServerSandbox:
    """How one server is confined: the backend ``kind``, its ``limits`` and ``grants``."""

    kind: str
    limits: Limits
    grants: Grants
    backends: Backends = field(repr=False, compare=False)

    async def plan(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> LaunchPlan:
        """The launch plan of ``argv``; the command is resolved on the host first (a clear 'not found').

        Raises:
            SandboxUnavailable: the backend is missing.
            SandboxStartFailed: its resources (a cgroup) could not be set up.
            FileNotFoundError: the command does not exist.
        """
        sandbox = await self.backends.get(self.kind)
        command = list(argv)
        if self.kind != "docker" and "/" not in command[0]:
            found = shutil.which(command[0], path=env.get("PATH"))
            if found is None:
                raise FileNotFoundError(2, "command not found", command[0])
            command[0] = found
        grants = _with_command_dir(self.grants, command[0]) if self.kind == "bwrap" else self.grants
        grants = await anyio.to_thread.run_sync(_prepare, grants)
        return sandbox.wrap(command, env, cwd, self.limits, grants)


def _prepare(grants: Grants) -> Grants:
    """Create the writable directories (a bind mount needs its source) and drop readable ones missing now.

    Checked at launch, not when the grants were made: a catalog environment built on first start exists only then.
    """
    for path in grants.writable:
        Path(path).mkdir(parents=True, exist_ok=True)
    return Grants(writable=grants.writable, readable=tuple(p for p in grants.readable if Path(p).exists()))


def _with_command_dir(grants: Grants, command: str) -> Grants:
    """``grants`` plus the (real) folder of ``command`` read-only, unless it is under ``/usr`` (always visible)."""
    if "/" not in command:
        return grants
    home = Path(command).resolve().parent
    if str(home).startswith("/usr/") or home in grants.readable:
        return grants
    return Grants(writable=grants.writable, readable=(*grants.readable, home))
