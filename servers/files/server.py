"""The `files` server: archives, checksums, diffs, search, type and encoding detection, data conversion.

Every path is confined to the allowed roots in ``FILES_ROOTS`` (``os.pathsep``-separated; the working directory when
unset): symlinks and ``..`` are resolved before the check, and archive members are checked before anything is written.
"""

from __future__ import annotations

from mcp.server import MCPServer

from servers._roots import AllowedRoots
from servers.files import archives, content, formats, search

ROOTS_ENV = "FILES_ROOTS"

__all__ = ["ROOTS_ENV", "build_server", "mcp"]


def build_server(roots: AllowedRoots) -> MCPServer:
    """A `files` server confined to ``roots``."""
    server = MCPServer(
        "files",
        title="Files",
        description="File utilities confined to allowed folders: archives, checksums, diffs, search, encodings",
        instructions=(
            f"Paths are relative to the first allowed root ({roots.roots[0]}) or absolute inside one of: "
            f"{roots.describe()}. Anything resolving outside them is refused."
        ),
    )
    for toolset in (
        archives.ArchiveTools(roots),
        search.SearchTools(roots),
        content.ContentTools(roots),
        formats.FormatTools(roots),
    ):
        toolset.register(server)
    return server


mcp = build_server(AllowedRoots.from_env(ROOTS_ENV))
