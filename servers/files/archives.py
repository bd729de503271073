"""Archive tools: create, list and extract zip and tar archives inside the allowed roots (zip-slip safe)."""

from __future__ import annotations

import tarfile
import zipfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import READ_ONLY, REPLACES
from servers._roots import AllowedRoots
from servers._toolset import Toolset, tool

ArchiveFormat = Literal["zip", "tar", "tar.gz", "tar.bz2", "tar.xz"]
TAR_MODES: dict[str, Literal["w", "w:gz", "w:bz2", "w:xz"]] = {
    "tar": "w",
    "tar.gz": "w:gz",
    "tar.bz2": "w:bz2",
    "tar.xz": "w:xz",
}
MAX_MEMBERS = 100_000


def _collect(roots: AllowedRoots, paths: list[str], base: Path) -> tuple[list[tuple[Path, str]], list[str]]:
    """Files to archive with their names relative to ``base``; symlinks leading out of the roots are skipped."""
    items: list[tuple[Path, str]] = []
    skipped: list[str] = []
    for raw in paths:
        top = roots.resolve(raw, must_exist=True, kind="input path")
        candidates = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file() or p.is_symlink())
        for path in candidates:
            real = path.resolve()
            if not roots.contains(real) or not real.is_file():
                skipped.append(str(path))
                continue
            try:
                name = path.relative_to(base).as_posix()
            except ValueError:
                name = path.name
            items.append((real, name))
    return items, skipped


def _archive_kind(path: Path) -> Literal["zip", "tar"]:
    if zipfile.is_zipfile(path):
        return "zip"
    if tarfile.is_tarfile(path):
        return "tar"
    raise ToolError(f"{path.name} is neither a zip nor a tar archive")


def _safe_name(name: str) -> PurePosixPath:
    """A member name that stays inside the destination, or a ToolError naming the offending member."""
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or (pure.parts and ":" in pure.parts[0]):
        raise ToolError(
            f"archive member {name!r} would be written outside the destination (zip-slip); nothing extracted"
        )
    return pure


def _check_tar_member(member: tarfile.TarInfo, dest: Path) -> None:
    _safe_name(member.name)
    if member.issym() or member.islnk():
        target = (dest / PurePosixPath(member.name).parent / member.linkname).resolve()
        if member.islnk():
            target = (dest / member.linkname).resolve()
        if not target.is_relative_to(dest):
            raise ToolError(f"archive member {member.name!r} links outside the destination; nothing extracted")
    elif not (member.isfile() or member.isdir()):
        raise ToolError(f"archive member {member.name!r} is a device or FIFO; nothing extracted")


class ArchiveTools(Toolset):
    """Creating, listing and extracting archives inside the allowed roots."""

    def __init__(self, roots: AllowedRoots) -> None:
        self.roots = roots

    @tool(
        name="archive_create",
        description=(
            "Pack files and folders (recursively) into a zip or tar(.gz/.bz2/.xz) archive inside the allowed roots. "
            "Use to bundle outputs or back up a folder. Member names are relative to `base` (default: the first "
            "root). Returns the archive path, member count, total input bytes and any skipped symlinks."
        ),
        annotations=REPLACES,
    )
    def archive_create(
        self,
        paths: Annotated[list[str], Field(min_length=1, max_length=1000, description="files or folders to pack")],
        output: Annotated[str, Field(description="archive path to write, e.g. out/bundle.zip")],
        format: Annotated[ArchiveFormat, Field(description="archive format")] = "zip",
        base: Annotated[str | None, Field(description="folder member names are relative to")] = None,
        overwrite: Annotated[bool, Field(description="replace an existing archive")] = False,
    ) -> CallToolResult:
        base_dir = self.roots.existing_dir(base, kind="base") if base else self.roots.roots[0]
        target = self.roots.output_file(output, overwrite=overwrite)
        items, skipped = _collect(self.roots, paths, base_dir)
        items = [(p, n) for p, n in items if p != target]
        if not items:
            raise ToolError("nothing to archive: the paths hold no regular files inside the allowed roots")
        if format == "zip":
            with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for path, name in items:
                    zf.write(path, name)
        else:
            with tarfile.open(target, TAR_MODES[format]) as tf:
                for path, name in items:
                    tf.add(path, arcname=name, recursive=False)
        total = sum(p.stat().st_size for p, _ in items)
        return json_result(
            {
                "archive": str(target),
                "format": format,
                "members": len(items),
                "inputBytes": total,
                "archiveBytes": target.stat().st_size,
                "skipped": skipped,
            }
        )

    @tool(
        name="archive_list",
        description=(
            "List the members of a zip or tar archive without extracting: name, size, compressed size (zip), "
            "modification time and type. Use before archive_extract to see what an archive holds."
        ),
        annotations=READ_ONLY,
    )
    def archive_list(
        self,
        archive: Annotated[str, Field(description="zip or tar archive path")],
    ) -> CallToolResult:
        path = self.roots.existing_file(archive, kind="archive")
        rows: list[list[object]] = []
        if _archive_kind(path) == "zip":
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    when = datetime(*info.date_time).isoformat()
                    kind = "dir" if info.is_dir() else "file"
                    rows.append([info.filename, info.file_size, info.compress_size, when, kind])
        else:
            with tarfile.open(path) as tf:
                for member in tf.getmembers():
                    when = datetime.fromtimestamp(member.mtime, UTC).isoformat()
                    kind = "dir" if member.isdir() else "symlink" if member.issym() else "file"
                    rows.append([member.name, member.size, None, when, kind])
        return table_result(["name", "size", "compressed", "modified", "type"], rows, title=f"{path.name}")

    @tool(
        name="archive_extract",
        description=(
            "Extract a zip or tar archive into a folder inside the allowed roots. Every member is checked first: "
            "absolute names, '..' escapes (zip-slip), links out of the destination and device files refuse the whole "
            "archive; a total-size cap guards against archive bombs. Returns the destination and extracted files."
        ),
        annotations=REPLACES,
    )
    def archive_extract(
        self,
        archive: Annotated[str, Field(description="zip or tar archive path")],
        destination: Annotated[str, Field(description="folder to extract into (created when missing)")],
        overwrite: Annotated[bool, Field(description="replace files that already exist")] = False,
        max_total_bytes: Annotated[int, Field(ge=1, le=10 * 2**30, description="refuse beyond this size")] = 2**30,
    ) -> CallToolResult:
        path = self.roots.existing_file(archive, kind="archive")
        dest = self.roots.resolve(destination, kind="destination")
        if dest.exists() and not dest.is_dir():
            raise ToolError(f"destination {destination!r} exists and is not a folder")
        names: list[str] = []
        if _archive_kind(path) == "zip":
            with zipfile.ZipFile(path) as zf:
                infos = zf.infolist()
                _check_members([(i.filename, i.file_size, i.is_dir()) for i in infos], dest, overwrite, max_total_bytes)
                dest.mkdir(parents=True, exist_ok=True)
                for info in infos:
                    zf.extract(info, dest)
                    names.append(info.filename)
        else:
            with tarfile.open(path) as tf:
                members = tf.getmembers()
                for member in members:
                    _check_tar_member(member, dest)
                _check_members([(m.name, m.size, m.isdir()) for m in members], dest, overwrite, max_total_bytes)
                dest.mkdir(parents=True, exist_ok=True)
                if hasattr(tarfile, "data_filter"):  # PEP 706 (3.11.4+): a second line of defence
                    tf.extractall(dest, filter="data")
                else:  # the members were all checked above
                    tf.extractall(dest)
                names = [m.name for m in members]
        return json_result({"destination": str(dest), "extracted": len(names), "members": names[:500]})


def _check_members(members: list[tuple[str, int, bool]], dest: Path, overwrite: bool, cap: int) -> None:
    if len(members) > MAX_MEMBERS:
        raise ToolError(f"archive has {len(members)} members, more than {MAX_MEMBERS}; nothing extracted")
    total = 0
    for name, size, is_dir in members:
        pure = _safe_name(name)
        target = (dest / pure).resolve()
        if not target.is_relative_to(dest):
            raise ToolError(f"archive member {name!r} resolves outside the destination; nothing extracted")
        if not is_dir and target.exists() and not overwrite:
            raise ToolError(f"{target} exists; pass overwrite=true to replace it (nothing extracted)")
        total += size
    if total > cap:
        raise ToolError(f"archive expands to {total} bytes, over max_total_bytes={cap}; nothing extracted")
