"""Allowed roots: the folders a first-party server may read and write, and the check that confines a path to them.

The manifest sets an environment variable (``DATA_ROOTS``, ``FILES_ROOTS``...) to one or more folders separated by
``os.pathsep``; a server builds :class:`AllowedRoots` from it once. Every path argument goes through
:meth:`AllowedRoots.resolve`, which makes it absolute (relative paths are taken from the first root), resolves
symlinks and ``..``, and refuses anything that lands outside every root with a :class:`ToolError` naming the roots.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from servers._common import ToolError

__all__ = ["AllowedRoots", "env_path"]


class AllowedRoots:
    """A fixed set of resolved folders; paths are accepted only inside one of them."""

    def __init__(self, roots: Sequence[str | Path]) -> None:
        resolved = [Path(r).expanduser().resolve() for r in roots if str(r).strip()]
        self.roots: tuple[Path, ...] = tuple(dict.fromkeys(resolved)) or (Path.cwd().resolve(),)

    @classmethod
    def from_env(cls, variable: str) -> AllowedRoots:
        """Roots from ``variable`` (``os.pathsep``-separated); the working directory when it is unset or empty."""
        value = os.environ.get(variable, "")  # noqa: TID251 - a server process is configured by its launch env
        return cls(value.split(os.pathsep))

    def describe(self) -> str:
        return ", ".join(str(r) for r in self.roots)

    def contains(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.roots)

    def resolve(self, path: str, *, must_exist: bool = False, kind: str = "path") -> Path:
        """``path`` made absolute and symlink-free, checked to lie inside a root (and to exist when asked)."""
        if not path or "\x00" in path:
            raise ToolError(f"{kind} must be a non-empty path without NUL bytes")
        raw = Path(path).expanduser()
        candidate = raw if raw.is_absolute() else self.roots[0] / raw
        real = candidate.resolve()
        if not self.contains(real):
            raise ToolError(f"{kind} {path!r} resolves to {real}, outside the allowed roots ({self.describe()})")
        if must_exist and not real.exists():
            raise ToolError(f"{kind} {path!r} does not exist (looked at {real})")
        return real

    def existing_file(self, path: str, *, kind: str = "file") -> Path:
        real = self.resolve(path, must_exist=True, kind=kind)
        if not real.is_file():
            raise ToolError(f"{kind} {path!r} is not a regular file")
        return real

    def existing_dir(self, path: str, *, kind: str = "folder") -> Path:
        real = self.resolve(path, must_exist=True, kind=kind)
        if not real.is_dir():
            raise ToolError(f"{kind} {path!r} is not a folder")
        return real

    def output_file(self, path: str, *, overwrite: bool, kind: str = "output") -> Path:
        """A path to write: inside a root, its parent folder created, refused when it exists and not ``overwrite``."""
        real = self.resolve(path, kind=kind)
        if real.exists() and not overwrite:
            raise ToolError(f"{kind} {path!r} exists; pass overwrite=true to replace it")
        if real.exists() and real.is_dir():
            raise ToolError(f"{kind} {path!r} is a folder")
        real.parent.mkdir(parents=True, exist_ok=True)
        return real

    def relative(self, path: Path) -> str:
        """``path`` relative to the root holding it (absolute when none does)."""
        for root in self.roots:
            if path == root or path.is_relative_to(root):
                return str(path.relative_to(root)) or "."
        return str(path)


def env_path(variable: str, default: Path) -> Path:
    """A folder named by the launch environment variable ``variable`` (``default`` when unset or empty)."""
    value = os.environ.get(variable, "")  # noqa: TID251 - a server process is configured by its launch env
    return Path(value).expanduser() if value.strip() else default
