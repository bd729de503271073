"""Shared by the devops tool modules: the workspace, file-or-text inputs, bundled linter binaries, annotations.

``DEVOPS_WORKSPACE`` (set by the hub at launch; default: the working directory) is the only folder whose files the
tools read or where ``make_run`` runs.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from mcp_types import ToolAnnotations
from pydantic import Field

from servers._common import ToolError

__all__ = [
    "PURE",
    "READ_FILES",
    "Content",
    "FilePath",
    "off_loop",
    "read_source",
    "run_tool",
    "tool_binary",
    "workspace",
]

P = ParamSpec("P")
T = TypeVar("T")
PURE = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
READ_FILES = PURE
MAX_SOURCE_BYTES = 2 * 1024 * 1024
TOOL_TIMEOUT = 60.0
LIMITER = anyio.CapacityLimiter(4)

Content = Annotated[str | None, Field(max_length=MAX_SOURCE_BYTES, description="the file's text (or give path)")]
FilePath = Annotated[str | None, Field(max_length=1000, description="file relative to the workspace (or give content)")]


def workspace() -> Path:
    """The resolved workspace folder."""
    raw = os.environ.get("DEVOPS_WORKSPACE")  # noqa: TID251 - launch configuration, read in one place
    return Path(raw or os.getcwd()).resolve()


def inside_workspace(path: str, *, kind: str = "file") -> Path:
    """``path`` (relative to the workspace, or absolute inside it) resolved, or a ``ToolError``."""
    root = workspace()
    real = (root / path).resolve()
    if not real.is_relative_to(root):
        raise ToolError(f"{path!r} is outside the workspace {root}")
    if kind == "file" and not real.is_file():
        raise ToolError(f"{path!r} is not a file in the workspace {root}")
    if kind == "dir" and not real.is_dir():
        raise ToolError(f"{path!r} is not a folder in the workspace {root}")
    return real


def read_source(content: str | None, path: str | None) -> tuple[str, str]:
    """``(text, label)`` from exactly one of ``content`` and ``path``."""
    if (content is None) == (path is None):
        raise ToolError("give exactly one of content (the text) or path (a workspace file)")
    if content is not None:
        return content, "<content>"
    assert path is not None
    real = inside_workspace(path)
    if real.stat().st_size > MAX_SOURCE_BYTES:
        raise ToolError(f"{path!r} is larger than {MAX_SOURCE_BYTES} bytes")
    return real.read_text(encoding="utf-8", errors="replace"), str(real.relative_to(workspace()))


def tool_binary(name: str) -> str:
    """A linter shipped by a Python wheel (next to this interpreter), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise ToolError(f"{name} is not installed (pip install hanzo-hub[servers-devops])")
    return found


async def run_tool(argv: list[str], stdin: str | None = None, cwd: Path | None = None,
                   timeout: float = TOOL_TIMEOUT) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    """Run a local binary with a deadline (no shell)."""
    try:
        with anyio.fail_after(timeout):
            return await anyio.run_process(
                argv, input=stdin.encode() if stdin is not None else None, check=False, cwd=cwd
            )
    except TimeoutError as exc:
        raise ToolError(f"{Path(argv[0]).name} did not finish within {timeout} s") from exc


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """A blocking call in a worker thread."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=LIMITER)
