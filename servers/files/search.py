"""Search tools: find files by glob and filters, grep with context, a tree view and a duplicate finder."""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

import regex as regexp
from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import READ_ONLY
from servers._roots import AllowedRoots
from servers._toolset import Toolset, tool

BINARY_SNIFF = 8192
MAX_GREP_FILE = 20 * 2**20
GREP_SECONDS = 30.0
"""Time all the matching of one grep may take: a pattern that backtracks exponentially is stopped with an error
instead of hanging the server (patterns compile with the ``regex`` package, whose match takes a timeout)."""


def _utc(value: datetime | None) -> float | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def _walk(roots: AllowedRoots, folder: Path, pattern: str, hidden: bool) -> Iterator[Path]:
    """Regular files under ``folder`` matching ``pattern`` whose real path stays inside the roots."""
    if ".." in Path(pattern).parts or Path(pattern).is_absolute():
        raise ToolError(f"pattern {pattern!r} must be relative to the folder and must not contain '..'")
    for path in sorted(folder.glob(pattern)):
        rel = path.relative_to(folder)
        if not hidden and any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and roots.contains(path.resolve()):
            yield path


def _is_binary(path: Path) -> bool:
    with path.open("rb") as fh:
        return b"\x00" in fh.read(BINARY_SNIFF)


class SearchTools(Toolset):
    """Finding files and text, tree views and duplicates."""

    def __init__(self, roots: AllowedRoots) -> None:
        self.roots = roots

    @tool(
        name="find_files",
        description=(
            "Find files under a folder by glob pattern ('**/*.py' recurses), filtered by size and modification "
            "time. Use to locate files before reading or processing them. Returns a table of path (relative to the "
            "folder), size in bytes and modification time (UTC), newest first or by name."
        ),
        annotations=READ_ONLY,
    )
    def find_files(
        self,
        folder: Annotated[str, Field(description="folder to search (inside the allowed roots)")] = ".",
        pattern: Annotated[str, Field(min_length=1, description="glob relative to the folder")] = "**/*",
        min_size: Annotated[int | None, Field(ge=0, description="minimum size in bytes")] = None,
        max_size: Annotated[int | None, Field(ge=0, description="maximum size in bytes")] = None,
        modified_after: Annotated[datetime | None, Field(description="ISO 8601; naive means UTC")] = None,
        modified_before: Annotated[datetime | None, Field(description="ISO 8601; naive means UTC")] = None,
        include_hidden: Annotated[bool, Field(description="include dot-files and dot-folders")] = False,
        sort: Annotated[Literal["name", "newest", "largest"], Field(description="order of the rows")] = "name",
        limit: Annotated[int, Field(ge=1, le=10_000, description="maximum rows returned")] = 500,
    ) -> CallToolResult:
        base = self.roots.existing_dir(folder)
        after, before = _utc(modified_after), _utc(modified_before)
        rows: list[tuple[str, int, float]] = []
        for path in _walk(self.roots, base, pattern, include_hidden):
            st = path.stat()
            if (min_size is not None and st.st_size < min_size) or (max_size is not None and st.st_size > max_size):
                continue
            if (after is not None and st.st_mtime < after) or (before is not None and st.st_mtime > before):
                continue
            rows.append((path.relative_to(base).as_posix(), st.st_size, st.st_mtime))
        if sort == "newest":
            rows.sort(key=lambda r: -r[2])
        elif sort == "largest":
            rows.sort(key=lambda r: -r[1])
        shown = [[n, s, datetime.fromtimestamp(m, UTC).isoformat(timespec="seconds")] for n, s, m in rows[:limit]]
        return table_result(["path", "size", "modified"], shown, title=str(base), truncated=len(rows) > limit)

    @tool(
        name="grep",
        description=(
            "Search text files for a regular expression (Python re syntax), like grep -n -C. Use to find where "
            "something is defined or mentioned. Binary files are skipped. Returns matches with file, line number, "
            "the line and `context` lines before and after."
        ),
        annotations=READ_ONLY,
    )
    def grep(
        self,
        regex: Annotated[str, Field(min_length=1, description="Python regular expression")],
        folder: Annotated[str, Field(description="folder (or single file) to search")] = ".",
        pattern: Annotated[str, Field(min_length=1, description="glob of files to search")] = "**/*",
        ignore_case: Annotated[bool, Field(description="case-insensitive match")] = False,
        context: Annotated[int, Field(ge=0, le=20, description="lines of context before and after")] = 0,
        max_matches: Annotated[int, Field(ge=1, le=5000, description="stop after this many matches")] = 200,
    ) -> CallToolResult:
        try:
            rx = regexp.compile(regex, regexp.IGNORECASE if ignore_case else 0)
        except regexp.error as exc:
            raise ToolError(f"invalid regular expression {regex!r}: {exc}") from None
        deadline = time.monotonic() + GREP_SECONDS
        target = self.roots.resolve(folder, must_exist=True, kind="folder")
        files = [target] if target.is_file() else list(_walk(self.roots, target, pattern, False))
        base = target.parent if target.is_file() else target
        matches: list[dict[str, object]] = []
        searched = 0
        for path in files:
            if path.stat().st_size > MAX_GREP_FILE or _is_binary(path):
                continue
            searched += 1
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            for i, line in enumerate(lines):
                try:
                    hit = rx.search(line, timeout=max(deadline - time.monotonic(), 0.001))
                except TimeoutError:
                    raise ToolError(
                        f"the search took longer than {GREP_SECONDS:g} s; simplify the regular expression "
                        "(alternatives that overlap under repetition, like (a|aa)+, backtrack exponentially)"
                    ) from None
                if hit:
                    matches.append(
                        {
                            "file": path.relative_to(base).as_posix(),
                            "line": i + 1,
                            "text": line,
                            "before": lines[max(0, i - context) : i],
                            "after": lines[i + 1 : i + 1 + context],
                        }
                    )
                    if len(matches) >= max_matches:
                        break
            if len(matches) >= max_matches:
                break
        text = "\n".join(f"{m['file']}:{m['line']}: {m['text']}" for m in matches) or "no matches"
        return json_result(
            {
                "matches": matches,
                "count": len(matches),
                "filesSearched": searched,
                "truncated": len(matches) >= max_matches,
            },
            text=text,
        )

    @tool(
        name="tree",
        description=(
            "Show a folder as an indented tree (folders first, then files with sizes), down to a depth. Use to get an "
            "overview of a project layout. Returns the rendered tree text plus file and folder counts."
        ),
        annotations=READ_ONLY,
    )
    def tree(
        self,
        folder: Annotated[str, Field(description="folder to show")] = ".",
        depth: Annotated[int, Field(ge=1, le=12, description="levels to descend")] = 3,
        include_hidden: Annotated[bool, Field(description="show dot-files and dot-folders")] = False,
        max_entries: Annotated[int, Field(ge=1, le=20_000, description="stop after this many lines")] = 1000,
    ) -> CallToolResult:
        base = self.roots.existing_dir(folder)
        lines = [f"{base.name or base}/"]
        counts = {"files": 0, "folders": 0}

        def visit(path: Path, prefix: str, level: int) -> None:
            try:
                children = sorted(path.iterdir(), key=lambda p: (not p.is_dir(), p.name.lower()))
            except OSError as exc:
                lines.append(f"{prefix}[unreadable: {exc.strerror}]")
                return
            children = [c for c in children if include_hidden or not c.name.startswith(".")]
            for i, child in enumerate(children):
                if len(lines) >= max_entries:
                    return
                last = i == len(children) - 1
                branch, pad = ("└── ", "    ") if last else ("├── ", "│   ")
                if child.is_dir() and not child.is_symlink():
                    counts["folders"] += 1
                    lines.append(f"{prefix}{branch}{child.name}/")
                    if level < depth:
                        visit(child, prefix + pad, level + 1)
                else:
                    counts["files"] += 1
                    size = child.lstat().st_size
                    arrow = f" -> {child.readlink()}" if child.is_symlink() else ""
                    lines.append(f"{prefix}{branch}{child.name} ({size} B){arrow}")

        visit(base, "", 1)
        truncated = len(lines) >= max_entries
        return json_result({"tree": "\n".join(lines), **counts, "truncated": truncated}, text="\n".join(lines))

    @tool(
        name="find_duplicates",
        description=(
            "Find duplicate files under a folder by content: files are grouped by size, then by SHA-256. Use to "
            "reclaim space or spot copied files. Returns groups of identical files with their size and hash, largest "
            "wasted space first."
        ),
        annotations=READ_ONLY,
    )
    def find_duplicates(
        self,
        folder: Annotated[str, Field(description="folder to scan")] = ".",
        pattern: Annotated[str, Field(min_length=1, description="glob of files to consider")] = "**/*",
        min_size: Annotated[int, Field(ge=0, description="ignore files smaller than this (bytes)")] = 1,
    ) -> CallToolResult:
        base = self.roots.existing_dir(folder)
        by_size: dict[int, list[Path]] = defaultdict(list)
        for path in _walk(self.roots, base, pattern, True):
            size = path.stat().st_size
            if size >= min_size:
                by_size[size].append(path)
        groups: list[dict[str, object]] = []
        for size, paths in by_size.items():
            if len(paths) < 2:
                continue
            by_hash: dict[str, list[str]] = defaultdict(list)
            for path in paths:
                with path.open("rb") as fh:
                    digest = hashlib.file_digest(fh, "sha256").hexdigest()
                by_hash[digest].append(path.relative_to(base).as_posix())
            groups.extend(
                {"sha256": h, "size": size, "files": sorted(f), "wastedBytes": size * (len(f) - 1)}
                for h, f in by_hash.items()
                if len(f) > 1
            )
        groups.sort(key=lambda g: -int(str(g["wastedBytes"])))
        wasted = sum(int(str(g["wastedBytes"])) for g in groups)
        return json_result({"groups": groups, "groupCount": len(groups), "wastedBytes": wasted})
