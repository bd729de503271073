"""Legacy HTTP+SSE: what happens to a message the SDK's client fails to post.

The SDK's ``sse_client`` posts every message from one writer task and reads answers only from the event stream. An
error there (an error status, a network failure, a login the server no longer accepts) is logged and the writer
stops: that request, and every later one, waits out its timeout, while the connection looks alive.

:func:`watch` registers two callbacks for one HTTP client, and the SDK's post helper, wrapped once per process by
:func:`install`, reports to them:

- a **request the server refused** with an error status (a 500 from its handler, a 413, a 400) is answered at once
  with a JSON-RPC error for that request alone (``answered``): the server's own JSON-RPC error body where it sent
  one, else the status in words (``http_errors.ErrorStatusTransport`` has already put either in the body), and the
  SDK's writer is handed an accepted response so it goes on posting. The connection and the other requests live on,
  as over streamable HTTP. A step-up the login cannot serve arrives this way too, marked for the supervisor;
- a **post that failed as a whole** (no connection, a 401 or a login that is gone, a 404: the server forgot the
  session) ends the connection with the reason (``failed``), so the supervisor fails the requests at once, says
  why, and the next call connects again;
- a refused notification or response (no answer is awaited) is logged, and the writer goes on.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp.client.sse as sdk_sse
from mcp_types import INTERNAL_ERROR

from hanzo_hub.errors import BackendCrashed, HubError

__all__ = ["install", "watch"]

logger = logging.getLogger(__name__)

CONNECTION_STATUSES = frozenset({401, 404})
"""Statuses that end the connection: no usable login, or a session the server no longer knows."""


@dataclass(frozen=True)
class _Watch:
    server: str
    failed: Callable[[Exception], None]
    answered: Callable[[dict[str, Any]], None] | None


_watchers: weakref.WeakKeyDictionary[httpx2.AsyncClient, _Watch] = weakref.WeakKeyDictionary()


def watch(
    client: httpx2.AsyncClient,
    server: str,
    failed: Callable[[Exception], None],
    answered: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Tell ``failed`` of each post of ``server``'s legacy SSE connection through ``client`` that failed as a whole,
    and ``answered`` (a JSON-RPC error message) of each request the server refused alone (without ``answered``,
    every refusal ends the connection through ``failed``)."""
    install()
    _watchers[client] = _Watch(server, failed, answered)


def _failure(server: str, exc: Exception) -> Exception:
    if isinstance(exc, HubError):  # the hub's own word (a login the server no longer accepts): as it is
        return exc
    return BackendCrashed(server, f"could not be sent a request: {type(exc).__name__}: {exc}")


async def _refusal(response: httpx2.Response, posted: Any, server: str) -> dict[str, Any] | None:
    """The JSON-RPC error answering the refused request ``posted`` (``None``: it was no request)."""
    if not isinstance(posted, dict) or "method" not in posted or posted.get("id") is None:
        return None
    request_id = posted["id"]
    body: Any = None
    with contextlib.suppress(ValueError, httpx2.HTTPError):
        body = json.loads(await response.aread())
    if isinstance(body, dict) and isinstance(body.get("error"), dict) and body.get("id") == request_id:
        return {"jsonrpc": "2.0", "id": request_id, "error": body["error"]}
    message = f"server '{server}' answered HTTP {response.status_code}"
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": message}}


@functools.cache
def install() -> None:
    """Wrap the SDK's post helper in its legacy SSE client (once per process); unwatched clients pass unchanged."""
    post = sdk_sse.request_within_origin  # type: ignore[attr-defined]  # the SDK imports it there from _httpx_utils

    async def watched(client: httpx2.AsyncClient, method: str, url: Any, **kwargs: Any) -> httpx2.Response:
        watcher = _watchers.get(client)
        try:
            response: httpx2.Response = await post(client, method, url, **kwargs)
        except Exception as exc:
            if watcher is not None:
                watcher.failed(_failure(watcher.server, exc))
            raise
        if watcher is None or response.is_success:
            return response
        status = response.status_code
        if watcher.answered is not None and status not in CONNECTION_STATUSES:
            posted = kwargs.get("json")
            error = await _refusal(response, posted, watcher.server)
            if error is not None:
                watcher.answered(error)
            else:
                logger.warning("server %s refused a message (HTTP %s); it expects no answer", watcher.server, status)
            await response.aclose()
            return httpx2.Response(202, request=response.request)  # the SDK's writer goes on posting
        watcher.failed(BackendCrashed(watcher.server, f"refused a request with HTTP {status}"))
        return response  # the SDK raises for it next

    sdk_sse.request_within_origin = watched  # type: ignore[attr-defined]
