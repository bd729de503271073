"""Error statuses of remote servers, in words that name the server.

A streamable HTTP server that answers a request with an error status and a body that is no JSON-RPC error (a proxy's
HTML page for a 502, a framework's plain-text 500) leaves the SDK's client to answer the request with "Server
returned an error response": no server, no status, no hint. :class:`ErrorStatusTransport` wraps the HTTP client's
transport and puts a JSON-RPC error in place of such a body, naming the server, the status and the start of what the
server said; the SDK's client reads it as the request's answer. A JSON body passes unchanged (it may be the server's
own JSON-RPC error, which the SDK prefers), and so does a 404 (the SDK reads it as the end of its session).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2
from mcp_types import INTERNAL_ERROR

__all__ = ["ErrorStatusTransport", "replace_body"]

SNIPPET_BYTES = 2048
"""How much of an error body is read for the message (the rest is not read)."""
SNIPPET_CHARS = 200


class _Body(httpx2.AsyncByteStream):
    """A response body put in place of another, which is closed with it."""

    def __init__(self, body: bytes, replaced: httpx2.AsyncByteStream | httpx2.SyncByteStream) -> None:
        self._body = body
        self._replaced = replaced

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._body

    async def aclose(self) -> None:
        if isinstance(self._replaced, httpx2.AsyncByteStream):
            await self._replaced.aclose()


def replace_body(
    response: httpx2.Response, request: httpx2.Request, message: str, data: dict[str, str] | None = None
) -> None:
    """Put a JSON-RPC error answering ``request`` (``message``, ``data``) in place of the unread body of
    ``response``."""
    try:
        request_id = json.loads(request.content).get("id")
    except (ValueError, AttributeError, httpx2.RequestNotRead):
        request_id = None
    error: dict[str, object] = {"code": INTERNAL_ERROR, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
    for name in ("content-encoding", "content-length", "transfer-encoding"):
        response.headers.pop(name, None)
    response.headers["content-type"] = "application/json"
    response.stream = _Body(body, response.stream)


async def _snippet(response: httpx2.Response) -> str:
    """The start of ``response``'s body as text, whitespace collapsed (the rest is left unread)."""
    stream = response.stream
    head = b""
    if isinstance(stream, httpx2.AsyncByteStream):
        async for chunk in stream:
            head += chunk
            if len(head) >= SNIPPET_BYTES:
                break
    text = " ".join(head[:SNIPPET_BYTES].decode("utf-8", "replace").split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 3] + "..."


class ErrorStatusTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport answering a POST that got an error status and no JSON body with a JSON-RPC error that
    names ``server`` and the status (see the module)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, server: str) -> None:
        self._inner = inner
        self._server = server

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method != "POST" or response.status_code < 400 or response.status_code == 404:
            return response
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            return response
        said = await _snippet(response)
        message = f"server {self._server!r} answered HTTP {response.status_code}" + (f": {said}" if said else "")
        replace_body(response, request, message)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
