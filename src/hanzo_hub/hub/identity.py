"""Who is asking: the authenticated user of an HTTP request, or the local user over stdio."""

from __future__ import annotations

from mcp.server.auth.middleware.auth_context import get_access_token


def current_user(local_user: str) -> str:
    """The user id of the request being served (the token's subject), else ``local_user`` (stdio, loopback)."""
    token = get_access_token()
    if token is None:
        return local_user
    return token.subject or token.client_id
