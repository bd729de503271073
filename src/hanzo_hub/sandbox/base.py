"""The ``Sandbox`` protocol, its value types, and the table of backends.

A sandbox does two things for the hub:

- ``wrap()`` turns the command of a stdio downstream server into a ``LaunchPlan``: the argv, environment and working
  directory to hand to the stdio transport (``backends/pipes.py``), plus resources (a cgroup) to release with
  ``aclose()`` once the process has exited.
- ``run()`` executes a command (model-written code) to completion under ``Limits`` and reports a ``RunResult``.

Backends are chosen by name through ``SANDBOXES`` and loaded lazily by ``load_sandbox``, so the docker SDK is imported
only when the docker backend is selected.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio.to_thread

from hanzo_hub.errors import SandboxUnavailable

if TYPE_CHECKING:
    from hanzo_hub.config import SandboxLimitsSettings, SandboxSettings

__all__ = [
    "SANDBOXES",
    "Grants",
    "LaunchPlan",
    "LimitName",
    "Limits",
    "Network",
    "RunResult",
    "Sandbox",
    "aload_sandbox",
    "load_sandbox",
    "python_code",
]

Network = Literal["none", "loopback", "full"]
LimitName = Literal["wall", "cpu", "memory", "pids", "file_size", "output"]

SANDBOXES: dict[str, str] = {
    "bwrap": "hanzo_hub.sandbox.bwrap:BwrapSandbox",
    "docker": "hanzo_hub.sandbox.docker:DockerSandbox",
    "none": "hanzo_hub.sandbox.unsandboxed:UnsandboxedRunner",
}


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits; ``None`` leaves a resource unlimited. ``network``: none and loopback both cut the host."""

    cpus: float | None = 2.0
    memory_bytes: int | None = 4 * 1024**3
    pids: int | None = 256
    wall_seconds: float | None = 60.0
    cpu_seconds: float | None = None
    file_size_bytes: int | None = 256 * 1024**2
    output_bytes: int = 1024 * 1024
    network: Network = "none"

    @classmethod
    def from_settings(cls, settings: SandboxLimitsSettings) -> Limits:
        """Limits from their config section."""
        return cls(**settings.model_dump())

    def with_(self, **changes: Any) -> Limits:
        """A copy with some fields changed."""
        return replace(self, **changes)

    @property
    def effective_cpu_seconds(self) -> int | None:
        """RLIMIT_CPU in whole seconds: explicit, else wall time x CPUs (+1), else unlimited."""
        if self.cpu_seconds is not None:
            return max(1, int(self.cpu_seconds + 0.999))
        if self.wall_seconds is not None:
            return int(self.wall_seconds * max(self.cpus or 1.0, 1.0)) + 1
        return None


@dataclass(frozen=True, slots=True)
class Grants:
    """Directories the sandboxed process may see: ``writable`` read-write, ``readable`` read-only."""

    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()


@dataclass(slots=True)
class RunResult:
    """What a ``run()`` produced. ``limit`` names the limit that stopped it, if one did."""

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    limit: LimitName | None = None
    duration: float = 0.0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """Exited 0 and no limit stopped it."""
        return self.exit_code == 0 and self.limit is None


@dataclass(slots=True)
class LaunchPlan:
    """How to exec a wrapped stdio server. Call ``aclose()`` after the process has exited (idempotent)."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    cleanup: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)

    @property
    def command(self) -> str:
        """``argv[0]``, for ``StdioServerParameters(command=...)``."""
        return self.argv[0]

    @property
    def args(self) -> list[str]:
        """``argv[1:]``, for ``StdioServerParameters(args=...)``."""
        return self.argv[1:]

    async def aclose(self) -> None:
        """Kill whatever is left in the plan's cgroup and remove it."""
        cleanup, self.cleanup = self.cleanup, None
        if cleanup is not None:
            await cleanup()


@runtime_checkable
class Sandbox(Protocol):
    """An isolation backend. Construct with ``(settings: SandboxSettings)``; raise ``SandboxUnavailable`` there."""

    name: str

    def wrap(
        self, command: Sequence[str], env: Mapping[str, str], cwd: str | None, limits: Limits, grants: Grants
    ) -> LaunchPlan:
        """Plan the launch of a long-running stdio server under ``limits`` and ``grants``.

        Raises:
            SandboxStartFailed: resources for the plan (a cgroup) could not be set up.
        """
        ...

    async def run(
        self,
        argv: Sequence[str],
        limits: Limits,
        grants: Grants,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> RunResult:
        """Run ``argv`` to completion (or until a limit stops it); nothing it started survives the call.

        Raises:
            SandboxStartFailed: the process or container could not be started.
        """
        ...

    async def aclose(self) -> None:
        """Release backend resources (warm containers, clients)."""
        ...


def python_code(code: str, interpreter: str = "/usr/bin/python3") -> list[str]:
    """The argv that runs ``code`` with the system interpreter in isolated mode."""
    return [interpreter, "-I", "-c", code]


def load_sandbox(kind: str, settings: SandboxSettings) -> Sandbox:
    """Instantiate the backend ``kind`` from ``SANDBOXES``.

    Raises:
        SandboxUnavailable: unknown kind, or the machine lacks the backend (the message says why).
    """
    target = SANDBOXES.get(kind)
    if target is None:
        raise SandboxUnavailable(f"unknown sandbox {kind!r}; expected one of {sorted(SANDBOXES)}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SandboxUnavailable(f"sandbox {kind!r} needs a missing Python package: {exc.name}") from exc
    factory: Callable[[SandboxSettings], Sandbox] = getattr(module, attr)
    return factory(settings)


async def aload_sandbox(kind: str, settings: SandboxSettings) -> Sandbox:
    """``load_sandbox`` in a worker thread: the docker backend pings its daemon while it is constructed.

    Raises:
        SandboxUnavailable: as ``load_sandbox``.
    """

    return await anyio.to_thread.run_sync(load_sandbox, kind, settings)


HOST_PYTHON_PREFIXES: tuple[str, ...] = tuple(dict.fromkeys((sys.prefix, sys.base_prefix)))
"""Interpreter prefixes bound read-only into sandboxes so a venv's servers run inside them."""
