"""File and environment tools, confined to allowed roots: tail, directory size, largest files, env, which.

The roots come from ``SYSTEM_ALLOWED_ROOTS`` (``os.pathsep``-separated, set by the hub at launch); by default they are
the server's working directory and ``/var/log``. Paths are resolved (symlinks followed) before the check, so a link
inside a root that points outside it is refused.
"""

from __future__ import annotations

import heapq
import os
import re
import shutil
from collections import deque
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.system._util import READ_ONLY, off_loop

__all__ = ["allowed_roots", "register"]

ROOTS_VARIABLE = "SYSTEM_ALLOWED_ROOTS"
SECRET_NAME = re.compile(r"(?i)(secret|token|passw|pwd|key|credential|auth|cookie|session|private|dsn|api)")
SECRET_VALUE = re.compile(r"(?i)(://[^/\s:]+:[^@\s]+@|^(ghp|gho|sk|xox[bap]|AKIA)[-_A-Za-z0-9]{8,})")
MAX_TAIL_BYTES = 4 * 1024 * 1024
SCAN_LIMIT = 200_000


def allowed_roots() -> list[Path]:
    """The resolved roots files may be read under (from ``SYSTEM_ALLOWED_ROOTS``, else cwd and /var/log)."""
    raw = os.environ.get(ROOTS_VARIABLE)  # noqa: TID251 - the server's launch configuration, read in one place
    parts = [p for p in raw.split(os.pathsep) if p] if raw else [os.getcwd(), "/var/log"]
    return [Path(p).resolve() for p in parts]


def _confined(path: str) -> Path:
    real = Path(path).expanduser().resolve()
    roots = allowed_roots()
    if not any(real == root or real.is_relative_to(root) for root in roots):
        raise ToolError(f"{path!r} is outside the allowed roots {[str(r) for r in roots]}")
    return real


def _tail(path: str, lines: int, grep: str | None) -> dict[str, Any]:
    real = _confined(path)
    if not real.is_file():
        raise ToolError(f"{path!r} is not a regular file")
    pattern = re.compile(grep) if grep else None
    size = real.stat().st_size
    with real.open("rb") as handle:
        handle.seek(max(0, size - MAX_TAIL_BYTES))
        data = handle.read()
    kept: deque[str] = deque(maxlen=lines)
    for line in data.decode("utf-8", "replace").splitlines():
        if pattern is None or pattern.search(line):
            kept.append(line)
    return {"path": str(real), "size_bytes": size, "lines": list(kept), "count": len(kept)}


def _walk(root: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for folder, dirs, files in os.walk(root, onerror=None):
        dirs[:] = [d for d in dirs if not Path(folder, d).is_symlink()]
        for name in files:
            path = Path(folder, name)
            try:
                if not path.is_symlink():
                    found.append((path.stat().st_size, str(path)))
            except OSError:
                continue
            if len(found) >= SCAN_LIMIT:
                return found
    return found


def _dir_size(path: str) -> dict[str, Any]:
    real = _confined(path)
    if not real.is_dir():
        raise ToolError(f"{path!r} is not a directory")
    per_child: dict[str, int] = {}
    files = _walk(real)
    for size, name in files:
        rel = Path(name).relative_to(real).parts
        key = rel[0] if len(rel) > 1 else "."
        per_child[key] = per_child.get(key, 0) + size
    top = sorted(per_child.items(), key=lambda kv: -kv[1])[:50]
    return {"path": str(real), "total_bytes": sum(s for s, _ in files), "files": len(files),
            "truncated": len(files) >= SCAN_LIMIT, "children": [{"name": k, "bytes": v} for k, v in top]}  # fmt: skip


def register(mcp: MCPServer) -> None:
    """Add the file and environment tools to ``mcp``."""

    @mcp.tool(annotations=READ_ONLY)
    async def file_tail(
        path: Annotated[str, Field(min_length=1, description="file under an allowed root (e.g. a log file)")],
        lines: Annotated[int, Field(ge=1, le=5000)] = 50,
        grep: Annotated[str | None, Field(max_length=500, description="regex; keep only matching lines")] = None,
    ) -> CallToolResult:
        """The last ``lines`` lines of a text file (like ``tail -n``), optionally only those matching a regex. Only
        files under the server's allowed roots (by default its working directory and /var/log) can be read.
        """
        try:
            return json_result(await off_loop(_tail, path, lines, grep))
        except re.error as exc:
            raise ToolError(f"invalid grep regex: {exc}") from exc
        except OSError as exc:
            raise ToolError(f"cannot read {path!r}: {exc.strerror}") from exc

    @mcp.tool(annotations=READ_ONLY)
    async def dir_size(
        path: Annotated[str, Field(min_length=1, description="directory under an allowed root")],
    ) -> CallToolResult:
        """Total bytes and file count of a directory tree (like ``du -s``) plus the size of each direct child, largest
        first. Symlinks are not followed. Use it to find what fills a folder.
        """
        return json_result(await off_loop(_dir_size, path))

    @mcp.tool(annotations=READ_ONLY)
    async def largest_files(
        path: Annotated[str, Field(min_length=1, description="directory under an allowed root")],
        limit: Annotated[int, Field(ge=1, le=500)] = 20,
    ) -> CallToolResult:
        """The largest files under a directory tree (path and bytes), biggest first. Use it when cleaning up disk."""

        def collect() -> list[list[Any]]:
            real = _confined(path)
            if not real.is_dir():
                raise ToolError(f"{path!r} is not a directory")
            return [[name, size] for size, name in heapq.nlargest(limit, _walk(real))]

        return table_result(["path", "bytes"], await off_loop(collect), title="largest files")

    @mcp.tool(annotations=READ_ONLY)
    async def env_list(
        prefix: Annotated[str | None, Field(max_length=100, description="only variables starting with this")] = None,
    ) -> CallToolResult:
        """The server's environment variables, sorted, with values of secret-looking variables (names containing
        TOKEN, KEY, SECRET, PASSWORD..., or values with embedded credentials) replaced by ``<redacted>``.
        """
        env = dict(os.environ)  # noqa: TID251 - listing the environment is this tool's purpose
        rows = []
        for name in sorted(env):
            if prefix and not name.startswith(prefix):
                continue
            value = env[name]
            secret = bool(SECRET_NAME.search(name) or SECRET_VALUE.search(value))
            rows.append([name, "<redacted>" if secret else value, secret])
        return table_result(["name", "value", "redacted"], rows, title="environment")

    @mcp.tool(annotations=READ_ONLY)
    async def which(
        commands: Annotated[
            list[Annotated[str, Field(pattern=r"^[A-Za-z0-9._+\-]+$")]], Field(min_length=1, max_length=50)
        ],
    ) -> CallToolResult:
        """Where each command is found on PATH (like ``which``), or null when it is not installed. Use it to check
        for tools (docker, git, node...) before suggesting commands.
        """
        rows = [[c, shutil.which(c)] for c in commands]
        return table_result(["command", "path"], rows, title="PATH lookup", missing=[c for c, p in rows if p is None])
