"""Which project a memory call belongs to: the client's explicit claim, else its first MCP root, else the default.

A handshake-era (2025-11-25) client that declared the ``roots`` capability is asked for ``roots/list`` once per
connection; the answer is cached until the client sends ``notifications/roots/list_changed``. The project id is
derived from the first root's URI (for ``file://`` roots the resolved path), so the same folder always maps to the
same project. The wait is bounded (``ROOTS_TIMEOUT``): a client that never answers gets the default project, and is
not asked again until it announces a change. Stateless-era (2026-07-28) clients cannot be asked (roots are
deprecated there): their project comes only from ``_meta["dev.hanzo-hub/project"]``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlparse

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from hanzo_hub.hub.connections import connection_of, session_connection, session_token, when_gone
from hanzo_hub.hub.identity import current_user
from hanzo_hub.hub.memory_mount import NAMED_SESSION, PROJECT_KEY, SESSION_KEY, identity_meta

logger = logging.getLogger(__name__)

MAX_SESSION_NAME = 128
"""Longest session name a stateless-era client may give."""

ROOTS_TIMEOUT = 2.0
"""Seconds a memory call waits for the client's ``roots/list`` answer before falling back to the default project."""

_ROOTS = types.ClientCapabilities(roots=types.RootsCapability())


def project_id(uri: str) -> str:
    """A stable, readable project id for a root URI: ``<last path segment>-<12 hex digits of its hash>``.

    ``file://`` roots are reduced to their resolved local path first, so ``file:///a/b/`` and ``file:///a/./b``
    name the same project.
    """
    parsed = urlparse(uri)
    key = str(Path(unquote(parsed.path) or "/").resolve()) if parsed.scheme == "file" else uri.rstrip("/")
    name = re.sub(r"[^a-z0-9]+", "-", key.rstrip("/").rsplit("/", 1)[-1].lower()).strip("-")[:40] or "root"
    return f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


class Projects:
    """Per-connection cache of the project derived from each client's roots, and each connection's session id."""

    def __init__(self, timeout: float = ROOTS_TIMEOUT, on_session_end: Callable[[str], None] | None = None) -> None:
        self.timeout = timeout
        self._cache: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._on_session_end = on_session_end

    def session_of(self, ctx: ServerRequestContext[Any, Any] | None, *, named: bool = False) -> str:
        """The session id of the request's connection (``default`` without one); ``on_session_end`` hears of its
        end once the connection is gone.

        A stateless-era request is a connection of its own. With ``named``, one that names a session in
        ``_meta["dev.hanzo-hub/session"]`` gets that one (``named:<name>``, within its user and project): it has no
        end to hear of, and the memory server ends it once idle (``memory.session_idle_timeout``).
        """
        if named and ctx is not None and ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            name = ((ctx.params or {}).get("_meta") or {}).get(SESSION_KEY)
            if isinstance(name, str) and 0 < len(name) <= MAX_SESSION_NAME:
                return f"{NAMED_SESSION}{name}"
        connection = connection_of(ctx)
        if connection is None:
            return "default"
        token = session_token(connection)
        if self._on_session_end is not None and connection not in self._sessions:
            with contextlib.suppress(TypeError):  # not weak-referenceable: its end cannot be seen
                self._sessions.add(connection)
                when_gone(connection, self._on_session_end)
        return token

    def forget(self, connection: Any) -> None:
        """The client's roots changed: ask again on its next memory call."""
        self._cache.pop(connection, None)

    async def project_of(self, ctx: ServerRequestContext[Any, Any] | None) -> str | None:
        """The project for the request being served; ``None`` means the default project."""
        if ctx is None:
            return None
        requested = (ctx.params or {}).get("_meta") or {}
        explicit = requested.get(PROJECT_KEY)
        if isinstance(explicit, str) and explicit:
            return explicit
        if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        try:
            if not ctx.session.check_client_capability(_ROOTS):
                return None
        except Exception:  # capability introspection must never fail a memory call
            return None
        connection = session_connection(ctx.session)
        if connection in self._cache:
            return self._cache[connection]
        project = await self._ask(ctx)
        self._cache[connection] = project
        return project

    async def _ask(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
        try:
            with anyio.fail_after(self.timeout):
                result = await ctx.session.send_request(
                    types.ListRootsRequest(), types.ListRootsResult, metadata=metadata
                )
        except TimeoutError:
            logger.info("the client did not answer roots/list within %.1f s; using the default project", self.timeout)
            return None
        except (MCPError, Exception) as exc:  # a client that cannot list roots just gets the default project
            logger.info("the client's roots/list failed (%s); using the default project", exc)
            return None
        if not result.roots:
            return None
        return project_id(str(result.roots[0].uri))


async def identity_for(
    projects: Projects,
    local_user: str,
    meta: types.RequestParamsMeta | None,
    ctx: ServerRequestContext[Any, Any] | None,
    *,
    named_sessions: bool = False,
) -> types.RequestParamsMeta:
    """``meta`` plus who is asking, for the hub's own servers: always the hub's view, never the client's (a
    stateless-era client may name its memory session: ``named_sessions``, see ``Projects.session_of``)."""
    project = await projects.project_of(ctx)
    identity = identity_meta(current_user(local_user), project, projects.session_of(ctx, named=named_sessions))
    return cast(types.RequestParamsMeta, {**(meta or {}), **identity})
