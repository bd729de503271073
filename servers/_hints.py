"""Tool annotation presets shared by the first-party servers that touch only local state (no open world)."""

from __future__ import annotations

from mcp_types import ToolAnnotations

__all__ = ["CREATES", "READ_ONLY", "REPLACES"]

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
"""Reads files or in-memory state and changes nothing."""

CREATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
"""Adds state (a named frame, a model, a new file); repeating the call gives the same state."""

REPLACES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
"""May overwrite an existing file or entry (only when the caller asks with ``overwrite``)."""
