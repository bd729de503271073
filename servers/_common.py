"""What every first-party server shares: result shapes, argument errors and the stdio entry point.

- Tables come back as structured content (``{"columns": [...], "rows": [...]}``) plus a text rendering.
- Plots and images come back as MCP image content (PNG, base64).
- A bad argument or a failed operation raises :class:`ToolError` with a message saying what to change; the SDK
  turns it into an ``isError`` result, so the server never goes down because of one call.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ImageContent, TextContent

__all__ = ["ToolError", "image_result", "json_result", "run", "table_result", "text_of"]

MAX_TEXT_ROWS = 50
"""Rows rendered into a table's text content; the structured content carries all of them."""


def text_of(value: Any) -> str:
    """Compact, readable JSON for a text content block (non-JSON values via ``str``)."""
    return json.dumps(value, ensure_ascii=False, default=str, indent=1)


def json_result(value: Mapping[str, Any], *, text: str | None = None) -> CallToolResult:
    """A result whose structured content is ``value`` and whose text is ``text`` (JSON of ``value`` by default)."""
    body = dict(value)
    return CallToolResult(
        content=[TextContent(type="text", text=text if text is not None else text_of(body))],
        structured_content=json.loads(json.dumps(body, default=str)),
    )


def table_result(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str = "", **extra: Any
) -> CallToolResult:
    """A table: structured ``{"columns", "rows", "rowCount", **extra}`` plus a pipe-separated text rendering."""
    cols = [str(c) for c in columns]
    body_rows = [list(r) for r in rows]
    lines = [title] if title else []
    lines.append(" | ".join(cols))
    lines.extend(" | ".join("" if v is None else str(v) for v in row) for row in body_rows[:MAX_TEXT_ROWS])
    if len(body_rows) > MAX_TEXT_ROWS:
        lines.append(f"... {len(body_rows) - MAX_TEXT_ROWS} more rows in the structured content")
    return json_result({"columns": cols, "rows": body_rows, "rowCount": len(body_rows), **extra}, text="\n".join(lines))


def image_result(png: bytes, *, caption: str, mime_type: str = "image/png", **extra: Any) -> CallToolResult:
    """An image content block (base64) with a caption; ``extra`` becomes structured content when given."""
    content: list[TextContent | ImageContent] = [
        ImageContent(type="image", data=base64.b64encode(png).decode("ascii"), mime_type=mime_type),
        TextContent(type="text", text=caption),
    ]
    return CallToolResult(content=content, structured_content=extra or None)


def run(server: MCPServer) -> None:
    """Serve ``server`` over stdio, logging to stderr (never stdout: it carries the protocol)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    server.run("stdio")
