"""The message size cap (``backends.max_message_bytes``) on remote servers' answers, as stdio servers have it.

Three ways a remote server answers, three places to cap:

- a JSON body (the stateless era, and ``json_response`` servers): :class:`CappedTransport` wraps the HTTP client's
  transport and stops reading a body past the cap with ``httpx2.StreamError``, which the SDK's streamable HTTP
  client turns into a JSON-RPC error for the request it answered;
- a server-sent event on a streamable HTTP server: the SDK's own ``max_sse_event_size`` (its default, 1 MiB, is
  far below what a stdio server may send, so a larger tool result used to fail as a lost connection);
- a server-sent event on a legacy HTTP+SSE server: the SDK's ``sse_client`` has no such parameter and always opens
  its stream with the 1 MiB default; :func:`capped_client` records the cap of the HTTP client it makes, and the
  SDK's stream opener, wrapped once by :func:`install`, opens that client's streams with it.

A stream of events is not capped as a whole (a long-lived stream may carry any number of events); each event is.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import mcp.client.sse as sdk_sse

__all__ = ["CappedTransport", "capped_client", "install"]

SDK_SSE_EVENT_CAP = 1024 * 1024
"""The SDK's default for one server-sent event (used where no cap is set)."""

_event_caps: weakref.WeakKeyDictionary[httpx2.AsyncClient, int | None] = weakref.WeakKeyDictionary()


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, cap: int, server: str) -> None:
        self._inner = inner
        self._cap = cap
        self._server = server

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._cap:
                raise httpx2.StreamError(
                    f"server {self._server!r} answered with more than {self._cap} bytes (backends.max_message_bytes)"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose response bodies, event streams aside, end with an error past ``cap`` bytes."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, cap: int, server: str) -> None:
        self._inner = inner
        self._cap = cap
        self._server = server

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if "text/event-stream" not in response.headers.get("content-type", ""):
            stream = response.stream
            assert isinstance(stream, httpx2.AsyncByteStream)
            response.stream = _CappedBody(stream, self._cap, self._server)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client(server: str, cap: int, **kwargs: Any) -> httpx2.AsyncClient:
    """An HTTP client for remote server ``server`` whose answers are capped at ``cap`` bytes (0: no cap): bodies by
    :class:`CappedTransport` (around ``kwargs["transport"]`` when given), each event of a legacy SSE stream by the
    wrapped opener. ``kwargs`` go to the client."""
    install()
    if cap:
        kwargs["transport"] = CappedTransport(kwargs.get("transport") or httpx2.AsyncHTTPTransport(), cap, server)
    client = httpx2.AsyncClient(**kwargs)
    _event_caps[client] = cap or None
    return client


@functools.cache
def install() -> None:
    """Have the SDK's legacy SSE client open a capped client's streams with its cap (once per process)."""
    opener = sdk_sse.sse_within_origin  # type: ignore[attr-defined]  # the SDK imports it there from _httpx_utils

    def capped(client: httpx2.AsyncClient, url: Any, **kwargs: Any) -> Any:
        if client in _event_caps:
            kwargs.setdefault("max_event_size", _event_caps[client])
        return opener(client, url, **kwargs)

    sdk_sse.sse_within_origin = capped  # type: ignore[attr-defined]
