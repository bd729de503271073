"""Running code through ``hanzo_hub.sandbox``: one backend per server process, a scratch folder per call.

Every execution goes through ``Sandbox.run()`` with ``Limits`` (wall time, CPU, memory, pids, output) and ``Grants``
(a fresh scratch folder read-write, optionally the workspace read-only). Nothing here runs model code directly.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import anyio

from hanzo_hub.config import SandboxSettings
from hanzo_hub.errors import SandboxError
from hanzo_hub.sandbox import Grants, Limits, RunResult, Sandbox, aload_sandbox
from servers._common import ToolError
from servers.code_exec.settings import ExecSettings, load_settings

__all__ = ["MAX_OUTPUT_CHARS", "Runner", "scratch_dir", "write_files"]

MAX_OUTPUT_CHARS = 100_000
LIMIT_WORDS = {
    "wall": "the wall-clock time limit",
    "cpu": "the CPU time limit",
    "memory": "the memory limit",
    "pids": "the process count limit",
    "file_size": "the file size limit",
    "output": "the output size limit",
}


@dataclass
class Runner:
    """The server's sandbox backend, loaded on first use."""

    settings: ExecSettings = field(default_factory=load_settings)
    _sandbox: Sandbox | None = None
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def sandbox(self) -> Sandbox:
        """The backend (``aload_sandbox`` once)."""
        async with self._lock:
            if self._sandbox is None:
                try:
                    self._sandbox = await aload_sandbox(self.settings.sandbox, SandboxSettings())
                except SandboxError as exc:
                    raise ToolError(f"the code sandbox is unavailable: {exc}") from exc
            return self._sandbox

    def limits(self, seconds: float, memory_mb: int) -> Limits:
        """Per-call limits, capped by the operator's ceilings; the network is the operator's grant."""
        return Limits(
            wall_seconds=min(seconds, self.settings.max_seconds),
            memory_bytes=min(memory_mb, self.settings.max_memory_mb) * 1024**2,
            cpus=1.0,
            pids=128,
            file_size_bytes=64 * 1024**2,
            output_bytes=1024**2,
            network=self.settings.network,
        )

    async def run(
        self,
        argv: Sequence[str],
        limits: Limits,
        grants: Grants,
        *,
        cwd: str | None = None,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """``Sandbox.run`` with errors mapped to ``ToolError``."""
        backend = await self.sandbox()
        try:
            return await backend.run(
                argv, limits, grants, env=env, cwd=cwd, stdin=stdin.encode() if stdin is not None else None
            )
        except SandboxError as exc:
            raise ToolError(f"the sandbox could not run the code: {exc}") from exc

    async def aclose(self) -> None:
        """Release the backend."""
        if self._sandbox is not None:
            await self._sandbox.aclose()
            self._sandbox = None


def python_argv(*args: str) -> list[str]:
    """This server's interpreter (its venv's packages are visible inside the sandbox), ignoring PYTHON* variables
    and the user site; unlike ``-I`` the script's folder stays importable, so helper files can be imported.
    """
    return [sys.executable, "-E", "-s", *args]


@asynccontextmanager
async def scratch_dir() -> AsyncIterator[Path]:
    """A fresh folder granted read-write to one run, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="code-exec-"))
    try:
        yield folder
    finally:
        await anyio.to_thread.run_sync(shutil.rmtree, folder, True)


def write_files(folder: Path, files: Mapping[str, str]) -> None:
    """Write ``files`` (relative POSIX paths → text) into ``folder``; absolute or ``..`` paths are refused."""
    for name, content in files.items():
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ToolError(f"file name {name!r} must be a relative path inside the scratch folder")
        target = folder.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def produced_files(folder: Path, before: set[str]) -> list[dict[str, Any]]:
    """Files the run created in ``folder`` (relative path and size), not counting the ones written for it."""
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and rel not in before and not rel.startswith((".pytest_cache", "__pycache__")):
            found.append({"path": rel, "bytes": path.stat().st_size})
    return found[:200]


def _decode(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS] + "\n... [output cut]"


def report(result: RunResult, limits: Limits, **extra: Any) -> dict[str, Any]:
    """A run's result as the tools return it; ``limit_message`` says which limit stopped it and its value."""
    message = None
    if result.limit is not None:
        value = {
            "wall": f"{limits.wall_seconds} s",
            "cpu": f"{limits.effective_cpu_seconds} s",
            "memory": f"{(limits.memory_bytes or 0) // 1024**2} MiB",
            "pids": str(limits.pids),
            "file_size": f"{(limits.file_size_bytes or 0) // 1024**2} MiB",
            "output": f"{limits.output_bytes} bytes",
        }[result.limit]
        message = f"stopped by {LIMIT_WORDS[result.limit]} ({value})"
    return {
        "ok": result.ok,
        "exit_code": result.exit_code,
        "stdout": _decode(result.stdout),
        "stderr": _decode(result.stderr),
        "limit": result.limit,
        "limit_message": message,
        "duration_seconds": round(result.duration, 3),
        "truncated": result.truncated,
        "network": limits.network,
        **extra,
    }
