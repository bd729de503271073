"""Messages that break the protocol but plainly answer one of the hub's requests: that request fails at once.

A downstream's message that is no valid JSON-RPC reaches the session as an exception on the transport's read
stream, which the SDK's session logs and drops; a request it answered would wait out its timeout. When the message
plainly answers a request (an object with an ``id`` and a ``result`` or ``error`` and no ``method``; or text that is
not JSON at all but starts like such an answer, its ``id`` before its ``result``), the request gets a JSON-RPC error
at once, saying what is wrong. Stdio frames come here from ``pipes``; the exceptions any other transport puts on its
read stream (a legacy SSE event, which the SDK's client parses and passes on as it is when that fails) from the
supervisor's read-stream watcher.

Only the top-level ``id`` counts: in text that is not JSON it must come before the ``result`` or ``error`` key (the
SDK's layout, ``{"jsonrpc", "id", "result"}``), so an ``id`` inside a result is never taken for the request's.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["answered_id", "answer_to_frame", "answer_to_junk", "error_answer"]

logger = logging.getLogger(__name__)

_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')
HEAD = 4096
"""How much of a message's text is searched for the request it answers."""

RequestId = str | int


def answered_id(head: bytes) -> RequestId | None:
    """The id of the request that a message starting with ``head`` answers, or ``None`` when it plainly answers
    none: its ``id`` must come before its ``result`` or ``error`` key, and any ``method`` after them (a server's own
    request may quote an id in its params)."""
    found = _ID.search(head)
    result = min((i for i in (head.find(b'"result"'), head.find(b'"error"')) if i >= 0), default=-1)
    if found is None or result < 0 or found.start() > result:
        return None
    method = head.find(b'"method"')
    if 0 <= method < result:
        return None
    request_id = json.loads(found.group(1))
    return request_id if isinstance(request_id, str | int) else None


def error_answer(request_id: RequestId, text: str) -> SessionMessage:
    """A JSON-RPC error (internal error, ``text``) answering request ``request_id``."""
    error = types.ErrorData(code=types.INTERNAL_ERROR, message=text)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _reason(message: dict[str, Any]) -> str:
    if "result" in message:
        return "its result is not an object" if not isinstance(message["result"], dict) else "it is not JSON-RPC 2.0"
    error = message["error"]
    if (
        not isinstance(error, dict)
        or not isinstance(error.get("code"), int)
        or not isinstance(error.get("message"), str)
    ):
        return "its error is not a JSON-RPC error object"
    return "it is not JSON-RPC 2.0"


def _answer_to_object(message: object, server: str) -> SessionMessage | None:
    if not isinstance(message, dict) or "method" in message or ("result" not in message and "error" not in message):
        return None
    request_id = message.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    return _failed(request_id, _reason(message), server)


def _failed(request_id: RequestId, reason: str, server: str) -> SessionMessage:
    logger.warning("%s: its answer to request %r breaks the protocol: %s", server, request_id, reason)
    return error_answer(request_id, f"server {server!r} answered with an invalid message: {reason}")


def answer_to_frame(frame: bytes | str, server: str) -> SessionMessage | None:
    """For one message's text that is no valid JSON-RPC message: an error answer to the request it plainly answers,
    or ``None`` (it answers none that can be told: it stays an exception on the read stream)."""
    try:
        message = json.loads(frame)
    except ValueError:
        head = (frame.encode("utf-8", "replace") if isinstance(frame, str) else frame)[:HEAD]
        request_id = answered_id(head)
        return None if request_id is None else _failed(request_id, "it is not valid JSON", server)
    return _answer_to_object(message, server)


def answer_to_junk(exc: Exception, server: str) -> SessionMessage | None:
    """For an exception a transport put on its read stream in place of a message it could not parse: an error answer
    to the request that message plainly answers, or ``None``. Pydantic keeps the message (its text, or the decoded
    object) as the input of its errors; any other exception says nothing of the message and gives ``None``."""
    if not isinstance(exc, ValidationError) or not exc.error_count():
        return None
    errors = exc.errors()
    for error in errors:  # an answer fails the request variant for want of a method: that error holds the object
        if isinstance(error.get("input"), dict):
            return _answer_to_object(error["input"], server)
    text = errors[0].get("input")
    if errors[0]["type"] == "json_invalid" and isinstance(text, str | bytes):
        return answer_to_frame(text, server)
    return None
