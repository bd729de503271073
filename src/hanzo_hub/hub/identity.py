"""Who is asking: the authenticated user of an HTTP request, or the local user over stdio.

The hub's own pipelines (the ``llm`` server's ``chat``) call tools on a user's behalf from tasks where no request
token is in context; ``acting_as`` makes those calls run as that user (and project and session) for the policy
guard and the memory server alike. Its ``turn`` names the pipeline's own model turn (one ``chat`` call), so the
guard's per-turn budget counts that turn's calls apart from the client's own turns, within the client's session.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from mcp.server.auth.middleware.auth_context import get_access_token


@dataclass(frozen=True)
class Acting:
    """The identity a hub-internal call runs as."""

    user: str
    project: str | None
    session: str
    """The client session as the hub stamped it into the pipeline's request (``dev.hanzo-hub/session``)."""
    turn: str | None = None
    """The pipeline's model turn its tool calls belong to (``None``: calls outside any turn, e.g. memory)."""


_acting: ContextVar[Acting | None] = ContextVar("hanzo_hub_acting", default=None)


@contextmanager
def acting_as(user: str, project: str | None, session: str, turn: str | None = None) -> Iterator[Acting]:
    """Run the block's tool calls as ``user`` in ``project`` and ``session`` (and, given, in model ``turn``)."""
    acting = Acting(user, project, session, turn)
    token = _acting.set(acting)
    try:
        yield acting
    finally:
        _acting.reset(token)


def acting() -> Acting | None:
    """The identity set by the innermost ``acting_as``, if any."""
    return _acting.get()


def current_user(local_user: str) -> str:
    """The user id of the request being served (the token's subject), else ``local_user`` (stdio, loopback)."""
    on_behalf = _acting.get()
    if on_behalf is not None:
        return on_behalf.user
    token = get_access_token()
    if token is None:
        return local_user
    return token.subject or token.client_id
