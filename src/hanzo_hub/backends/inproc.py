"""Servers living in the hub's process (first-party servers, tests): ``module:attribute`` import strings."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from mcp.server import MCPServer, Server

from hanzo_hub.backends.base import ConnectContext
from hanzo_hub.backends.listing import Listing
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


async def refreshed(server: MCPServer, stored: Listing) -> Listing | None:
    """``stored`` with the lists ``server``'s code registers now, if they differ (``None``: nothing changed).

    For the hub's own in-process servers: their lists come with the hub's code, so a snapshot an older hub wrote
    (a memory tool added since) must not be served until the server first starts. Listing an ``MCPServer`` needs no
    lifespan, so nothing is opened; the rest of the snapshot (server info, capabilities) is kept.
    """
    fresh = dataclasses.replace(
        stored,
        tools=tuple(await server.list_tools()),
        resources=tuple(await server.list_resources()),
        templates=tuple(await server.list_resource_templates()),
        prompts=tuple(await server.list_prompts()),
    )
    keys = ("tools", "resources", "resourceTemplates", "prompts")
    before, after = stored.to_json(), fresh.to_json()
    return None if all(before[k] == after[k] for k in keys) else fresh
