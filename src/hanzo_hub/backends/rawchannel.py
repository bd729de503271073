"""Raw JSON-RPC requests on a downstream connection, beside its SDK session.

The SDK ``ClientSession`` answers a request through its dispatcher: a receive loop, memory streams, typed
validation of the result. For the ``tools/call`` fast path (``hanzo_hub.hub.fastcall``) the hub needs none of that:
it sends a request straight into the transport's write stream and takes the matching response off the read stream
before the session sees it (``base._WatchedReadStream`` asks :meth:`RawChannel.claim` about every response). The
ids are strings with a per-connection random prefix, so they cannot collide with the session's integer ids.

On a transport that owns its pipes (``hanzo_hub.backends.pipes``) the channel goes rawer still: :meth:`attach_raw`
gives it the pipe's line writer, requests go out as JSON text, and the transport offers every frame it reads to
:meth:`take`, which finds this channel's answers by their id prefix and decodes them with ``json`` alone.

A request cancelled while in flight, or one whose ``timeout`` expires, sends the server ``notifications/cancelled``, as
the session would; a connection that ends fails every pending request with ``CONNECTION_CLOSED``, which the supervisor
turns into "crashed". A request waits on a plain asyncio future, and its timeout is a loop timer rather than a cancel
scope: this runs for every fast-path call, and a scope costs more than the rest of the wait (the hub runs on asyncio).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.client._transport import WriteStream
from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

CANCEL_NOTICE_TIMEOUT = 1.0


class _Pending:
    """One request in flight: woken by its answer, the connection's end, or its timer."""

    __slots__ = ("done", "expired", "matched", "message", "raw", "result_bytes")

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done
        self.message: types.JSONRPCResponse | types.JSONRPCError | None = None
        self.raw: dict[str, Any] | None = None
        self.result_bytes: bytes | None = None
        """The result's own JSON text, when the frame had the plain response layout (see :func:`_split`)."""
        self.matched = False
        self.expired = False

    def wake(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def expire(self) -> None:
        if not self.matched:
            self.expired = True
            self.wake()


class RawChannel:
    """Requests by raw params, answered by raw result dicts (see the module docstring)."""

    def __init__(self) -> None:
        self._prefix = f"hub-{secrets.token_hex(4)}-"
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._write: WriteStream[SessionMessage] | None = None
        self._line: Callable[[bytes], None] | None = None
        self._drain: Callable[[], Awaitable[None]] | None = None
        self._marker = self._prefix.encode("ascii")
        self._lead = _HEAD + self._marker
        self._closed = False

    def attach(self, write: WriteStream[SessionMessage]) -> None:
        """The connection is up: requests go to ``write``."""
        self._write = write

    def attach_raw(self, line: Callable[[bytes], None], drain: Callable[[], Awaitable[None]]) -> None:
        """The transport writes whole lines with ``line`` (then waits for ``drain``) and offers frames to ``take``."""
        self._line = line
        self._drain = drain

    @property
    def piped(self) -> bool:
        """Whether requests go out as whole lines on the transport's own pipes (stdio), past every stream wrapper:
        a stateless-era request sent this way carries exactly the ``_meta`` its caller stamped."""
        return self._line is not None

    @property
    def open(self) -> bool:
        """Whether requests can be sent."""
        return (self._write is not None or self._line is not None) and not self._closed

    def take(self, frame: bytes) -> bool:
        """Take a raw frame off the wire if it answers one of this channel's requests (see the module docstring).

        Only frames holding this connection's id prefix are decoded; a frame that is not a response to a pending
        request (a server request quoting the id, a late answer, garbage) is left to the session.
        """
        complete = self.match(frame)
        if complete is None:
            return False
        complete()
        return True

    def match(self, frame: bytes) -> Callable[[], None] | None:
        """Like :meth:`take`, but the waiting request is only woken by calling what this returns.

        The transport calls it once the session has read the frames that came before this one (a log message the
        server sent during the call must reach the client while the call is still in flight).
        """
        if not self._pending or self._marker not in frame:
            return None
        split = _split(frame, self._lead)
        waiting = self._pending.get(split[0]) if split is not None else None
        if split is not None and waiting is not None and not waiting.matched:
            try:
                result = _loads(split[1])  # exactly one JSON value, or it raises
            except ValueError:
                result = None
            if isinstance(result, dict):
                waiting.raw = {"result": result}
                waiting.result_bytes = split[1]
                waiting.matched = True
                return waiting.wake
        # Any other layout (or a result that is no object): decode the whole frame.
        try:
            decoded = _loads(frame)
        except ValueError:
            return None
        if not isinstance(decoded, dict) or "method" in decoded or ("result" not in decoded and "error" not in decoded):
            return None
        request_id = decoded.get("id")
        pending = self._pending.get(request_id) if isinstance(request_id, str) else None
        if pending is None or pending.matched:
            return None
        pending.raw = decoded
        pending.matched = True
        return pending.wake

    def claim(self, item: SessionMessage | Exception) -> bool:
        """Take ``item`` if it answers one of this channel's requests (the session never sees it then)."""
        if isinstance(item, Exception) or not self._pending:
            return False
        message = item.message
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) or not isinstance(message.id, str):
            return False
        pending = self._pending.get(message.id)
        if pending is None or pending.matched:
            return False
        pending.message = message
        pending.matched = True
        pending.wake()
        return True

    def close(self) -> None:
        """The connection ended: every pending request fails."""
        self._closed = True
        for pending in self._pending.values():
            pending.wake()

    async def request(self, method: str, params: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """Send one request and return its raw result.

        Raises:
            MCPError: the server answered with an error, or the connection closed (``CONNECTION_CLOSED``).
            TimeoutError: no answer within ``timeout`` seconds (the server was told the request is cancelled).
        """
        result, _ = await self.request_text(method, params, timeout=timeout)
        return result

    async def request_text(
        self, method: str, params: dict[str, Any], *, timeout: float | None = None
    ) -> tuple[dict[str, Any], bytes | None]:
        """Like :meth:`request`, also returning the result's JSON text as the server wrote it, when available.

        The text is there when the answer came over the raw pipes in the plain response layout; it decodes to the
        returned dict (it was decoded to make it), so a caller may pass it on instead of encoding the dict again.

        Raises:
            MCPError: the server answered with an error, or the connection closed (``CONNECTION_CLOSED``).
            TimeoutError: no answer within ``timeout`` seconds (the server was told the request is cancelled).
        """
        if not self.open:
            raise MCPError(types.CONNECTION_CLOSED, "the connection is closed")
        request_id = f"{self._prefix}{next(self._ids)}"
        loop = asyncio.get_running_loop()
        pending = self._pending[request_id] = _Pending(loop.create_future())
        timer = loop.call_later(timeout, pending.expire) if timeout is not None else None
        try:
            if self._line is not None and self._drain is not None:
                body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                self._line(_ENCODER.encode(body).encode("ascii") + b"\n")
                await self._drain()
            else:
                assert self._write is not None
                message = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
                await self._write.send(SessionMessage(message))
            await pending.done
            if pending.expired:
                await self._cancel(request_id)
                raise TimeoutError(f"no answer to {method} within {timeout:g} s")
        except asyncio.CancelledError:
            if not pending.matched:
                await self._cancel(request_id)
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise MCPError(types.CONNECTION_CLOSED, "the connection is closed") from None
        finally:
            if timer is not None:
                timer.cancel()
            del self._pending[request_id]
        if pending.raw is not None:
            return _raw_result(pending.raw), pending.result_bytes
        answer = pending.message
        if answer is None:
            raise MCPError(types.CONNECTION_CLOSED, "the connection closed before the answer")
        if isinstance(answer, types.JSONRPCError):
            raise MCPError(answer.error.code, answer.error.message, answer.error.data)
        return answer.result, None

    async def _cancel(self, request_id: str) -> None:
        if not self.open:
            return
        notice = types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/cancelled", params={"requestId": request_id, "reason": "cancelled"}
        )
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_NOTICE_TIMEOUT):
            try:
                if self._line is not None and self._drain is not None:
                    self._line(notice.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8") + b"\n")
                    await self._drain()
                    return
                assert self._write is not None
                await self._write.send(SessionMessage(notice))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                logger.debug("could not tell the server of a cancelled request: the connection is closed")


_ENCODER = json.JSONEncoder(separators=(",", ":"))
_DECODER = json.JSONDecoder()


def _loads(text: bytes) -> Any:
    """``json.loads`` of a UTF-8 frame without its per-call set-up (encoding detection, argument handling).

    Raises:
        ValueError: not one JSON value, or not UTF-8.
    """
    return _DECODER.decode(text.decode("utf-8", "surrogatepass"))


_HEAD = b'{"jsonrpc":"2.0","id":"'
_RESULT = b'","result":'


def _split(frame: bytes, lead: bytes) -> tuple[str, bytes] | None:
    """``(id, result text)`` of a frame in the plain response layout, ``{"jsonrpc":"2.0","id":"<ours>","result":...}``.

    This is the layout the SDK's servers write (no spaces, those three keys in that order). The result text is
    everything between ``"result":`` and the frame's closing brace: the caller decodes it, which proves it is one
    JSON value and nothing else (no fourth key). Any other layout is ``None``: decode the whole frame.
    """
    if not frame.startswith(lead):
        return None
    quote = frame.find(b'"', len(lead))
    if quote < 0 or not frame.startswith(_RESULT, quote):
        return None
    end = len(frame.rstrip())
    if frame[end - 1 : end] != b"}":
        return None
    return frame[len(_HEAD) : quote].decode("ascii", "replace"), frame[quote + len(_RESULT) : end - 1]


def _raw_result(decoded: dict[str, Any]) -> dict[str, Any]:
    """The result of a decoded response frame.

    Raises:
        MCPError: the server answered with an error (a malformed one becomes ``INTERNAL_ERROR``).
    """
    if "error" in decoded:
        error = decoded["error"]
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
            raise MCPError(types.INTERNAL_ERROR, "the server answered with a malformed JSON-RPC error")
        raise MCPError(code, message, error.get("data"))
    result: dict[str, Any] = decoded["result"]
    return result  # its shape is the caller's to check (a tools/call result is, before it is relayed)
