"""Legacy HTTP+SSE: a request the SDK's client fails to post ends the connection, with the reason.

The SDK's ``sse_client`` posts every request from one writer task. An error there (a login the server no longer
accepts, an error status, a network failure) is logged and the writer stops: that request, and every later one,
waits out its timeout, while the connection looks alive. :func:`watch` registers a callback for one HTTP client;
the SDK's post helper, wrapped once per process by :func:`install`, tells it of each failed post, and
``http.connect_sse`` ends the connection with the error, so the supervisor fails the requests at once and says why.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import httpx2
import mcp.client.sse as sdk_sse

from hanzo_hub.errors import BackendCrashed, HubError

__all__ = ["install", "watch"]

_watchers: weakref.WeakKeyDictionary[httpx2.AsyncClient, tuple[str, Callable[[Exception], None]]] = (
    weakref.WeakKeyDictionary()
)


def watch(client: httpx2.AsyncClient, server: str, failed: Callable[[Exception], None]) -> None:
    """Tell ``failed`` of every request of ``server`` that ``client`` fails to post on a legacy SSE connection."""
    install()
    _watchers[client] = (server, failed)


def _failure(server: str, exc: Exception) -> Exception:
    if isinstance(exc, HubError):  # the hub's own word (a login the server no longer accepts): as it is
        return exc
    return BackendCrashed(server, f"could not be sent a request: {type(exc).__name__}: {exc}")


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
                watcher[1](_failure(watcher[0], exc))
            raise
        if watcher is not None and not response.is_success:  # the SDK raises for it next
            watcher[1](BackendCrashed(watcher[0], f"refused a request with HTTP {response.status_code}"))
        return response

    sdk_sse.request_within_origin = watched  # type: ignore[attr-defined]
