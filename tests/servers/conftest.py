"""Fixtures for first-party server tests: an SDK client connected to the in-process server (real MCP protocol)."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client
from mcp_types import CallToolResult, TextContent


def text(result: CallToolResult) -> str:
    """All text content of a result, joined."""
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful result (fails the test with the error text otherwise)."""
    assert not result.is_error, text(result)
    if result.structured_content is not None:
        return dict(result.structured_content)
    return {"text": text(result)}


def err(result: CallToolResult) -> str:
    """The error text of a failed result (fails the test when the call succeeded)."""
    assert result.is_error, f"expected an error, got {json.dumps(result.structured_content)[:500]}"
    return text(result)


__all__ = ["Client", "err", "ok", "text"]
