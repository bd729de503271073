"""Tools written as methods: ``@tool(...)`` marks a method, :meth:`Toolset.register` adds the bound methods to a server.

A server's state (allowed roots, a frame or model registry) lives on the toolset instance, so each tool is a plain
method (measured on its own by the complexity check) and tests can build a server around fresh state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server import MCPServer
from mcp_types import ToolAnnotations

__all__ = ["Toolset", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "_first_party_tool"


def tool(*, name: str, description: str, annotations: ToolAnnotations) -> Callable[[F], F]:
    """Mark a method of a :class:`Toolset` subclass as an MCP tool."""

    def mark(fn: F) -> F:
        setattr(fn, _MARK, {"name": name, "description": description, "annotations": annotations})
        return fn

    return mark


class Toolset:
    """Base class of a group of tools; subclasses hold the state their tools share."""

    def register(self, mcp: MCPServer) -> None:
        """Add every marked method, in definition order (base classes first), to ``mcp``."""
        seen: set[str] = set()
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                meta = getattr(value, _MARK, None)
                if meta is not None and attr not in seen:
                    seen.add(attr)
                    mcp.tool(**meta)(getattr(self, attr))
