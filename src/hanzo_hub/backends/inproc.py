"""Servers living in the hub's process (first-party servers, tests): ``module:attribute`` import strings."""

from __future__ import annotations

import importlib
from typing import Any

from mcp.server import MCPServer, Server

from hanzo_hub.backends.base import ConnectContext
from hanzo_hub.config import InprocServerSpec


def connect(spec: InprocServerSpec, context: ConnectContext) -> Any:
    """The server object the target names: an ``MCPServer``/``Server`` instance, or a factory returning one.

    Raises:
        ImportError: the module does not import.
        AttributeError: it has no such attribute.
        TypeError: the attribute is neither a server nor a factory of one.
    """
    if context.local is not None:
        return context.local
    module, _, attr = spec.target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    if not isinstance(obj, MCPServer | Server) and callable(obj):
        obj = obj()
    if not isinstance(obj, MCPServer | Server):
        raise TypeError(f"{spec.target} is not an MCP server or a factory of one")
    return obj
