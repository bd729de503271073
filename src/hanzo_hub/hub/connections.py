"""One id per client connection: the session the hub stamps into its own servers' requests (``dev.hanzo-hub/session``).

The id was ``id()`` of the connection object, which CPython hands to a later object once the first is gone: a new
connection could come in under a closed one's id and find its session memories. A random token per connection
cannot be inherited. ``when_gone`` runs a callback when a connection closes (the SDK connection's exit stack), or
once it has been collected for anything else (a finalizer may run inside any allocation, so it only schedules the
callback on the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import weakref
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_tokens: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def connection_of(ctx: Any) -> Any | None:
    """The client connection a request context belongs to (``None``: no connection, e.g. the hub's own pipeline)."""
    return getattr(getattr(ctx, "session", None), "_connection", None)


def session_connection(session: Any) -> Any:
    """The connection a request-scoped server session belongs to: its ``state`` and ``exit_stack`` outlive the
    request. The one place the hub reads the SDK's private ``_connection`` (mcp 2.3 has no public accessor)."""
    return session._connection


def session_token(connection: Any) -> str:
    """The connection's session id: random, made on first use, the same for the connection's whole life."""
    try:
        token = _tokens.get(connection)
        if token is None:
            token = _tokens[connection] = secrets.token_hex(8)
        return token
    except TypeError:  # not weak-referenceable: nothing could forget it, so it gets no lasting token
        return f"c{id(connection):x}"


def when_gone(connection: Any, callback: Callable[[str], None]) -> None:
    """Call ``callback(session_token(connection))`` once ``connection`` has ended.

    The SDK's connections unwind an exit stack as they close (a handshake-era client disconnecting, an HTTP session
    ending; a stateless-era request's connection is that one request): the callback joins it. Anything else is
    watched until it is collected, and the callback then scheduled on the event loop.
    """
    token = session_token(connection)
    stack = getattr(connection, "exit_stack", None)
    if isinstance(stack, contextlib.AsyncExitStack):
        stack.callback(callback, token)
        return
    loop = asyncio.get_running_loop()
    try:
        weakref.finalize(connection, _schedule, loop, callback, token)
    except TypeError:  # not weak-referenceable: its end cannot be seen
        logger.debug("a client connection cannot be watched for its end")


def _schedule(loop: asyncio.AbstractEventLoop, callback: Callable[[str], None], token: str) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: the hub is gone, and what the callback would free too
        loop.call_soon_threadsafe(callback, token)
