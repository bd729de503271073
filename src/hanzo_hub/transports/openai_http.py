"""``POST /v1/chat/completions``: the hub's router behind an OpenAI-compatible endpoint, for non-MCP clients.

Served next to ``/mcp`` inside the same app, so the same authentication applies (bearer tokens / OAuth when
configured: no token, 401). The body is an OpenAI chat completion request; ``model`` may be omitted (or ``"auto"``)
to let the router choose. ``stream: true`` answers with server-sent events of ``chat.completion.chunk`` objects and a
final ``data: [DONE]``. Errors come back in OpenAI's error shape with a fitting status.

``POST /v1/feedback`` rates an answer for the router, as the ``feedback`` tool does: ``{"request_id": <the
completion's id>, "rating": 0..1 | "regenerated"}``; 404 for an id unknown to the caller, 409 for one rated already.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from hanzo_hub.errors import (
    AlreadyRated,
    BudgetExceeded,
    CompletionError,
    HubError,
    ModelNotFound,
    NoEligibleModel,
    RateLimited,
    UnknownRequest,
)
from hanzo_hub.hub.identity import current_user
from hanzo_hub.hub.llm_runtime import NO_PROVIDER, LlmRuntime
from hanzo_hub.llm.providers.openai_compat import parse_chat_request, render_chat_response, render_stream_chunk
from hanzo_hub.llm.ratings import Rating, fingerprint, quality_of
from hanzo_hub.llm.types import Caller, ChatRequest

__all__ = ["CHAT_PATH", "FEEDBACK_PATH", "openai_routes"]

logger = logging.getLogger(__name__)

CHAT_PATH = "/v1/chat/completions"
FEEDBACK_PATH = "/v1/feedback"
PROJECT_HEADER = "x-hanzo-project"
_STATUS: tuple[tuple[type[HubError], int, str], ...] = (
    (BudgetExceeded, 402, "insufficient_quota"),
    (RateLimited, 429, "rate_limit_exceeded"),
    (ModelNotFound, 404, "model_not_found"),
    (NoEligibleModel, 400, "no_eligible_model"),
)


def _error(status: int, message: str, code: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


def _failure(exc: HubError) -> JSONResponse:
    for cls, status, code in _STATUS:
        if isinstance(exc, cls):
            return _error(status, str(exc), code)
    return _error(502, str(exc), "upstream_error", "api_error")


class _Endpoint:
    """An ASGI app answering each request with :meth:`handle`, for the hub's router and the caller."""

    def __init__(self, runtime: LlmRuntime, local_user: str) -> None:
        self.runtime = runtime
        self.local_user = local_user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.handle(Request(scope, receive))
        await response(scope, receive, send)

    async def handle(self, request: Request) -> Response:
        raise NotImplementedError


class ChatCompletions(_Endpoint):
    """``POST /v1/chat/completions``."""

    async def handle(self, request: Request) -> Response:
        if request.method != "POST":
            return _error(405, "use POST", "method_not_allowed")
        try:
            body = json.loads(await request.body())
            chat = parse_chat_request(body)
        except ValueError as exc:
            return _error(400, f"bad request: {exc}", "invalid_request")
        if chat.model == "auto":
            chat = chat.model_copy(update={"model": None})
        if not self.runtime.available:
            return _error(503, NO_PROVIDER, "no_provider", "api_error")
        caller = Caller(user=current_user(self.local_user), project=request.headers.get(PROJECT_HEADER) or None)
        if body.get("stream") is True:
            return await self._stream(chat, caller)
        try:
            result = await self.runtime.chat(chat, caller, asked=fingerprint(chat.messages))
        except HubError as exc:
            return _failure(exc)
        return JSONResponse(render_chat_response(result))

    async def _stream(self, chat: ChatRequest, caller: Caller) -> Response:
        events = self.runtime.stream(chat, caller, asked=fingerprint(chat.messages)).__aiter__()
        try:
            first = await events.__anext__()  # failures before the first byte still get a proper status
        except StopAsyncIteration:
            return _error(502, "the model sent nothing", "upstream_error", "api_error")
        except HubError as exc:
            return _failure(exc)

        async def body() -> AsyncIterator[bytes]:
            request_id, model, tools = "chatcmpl-hanzo", chat.model or "auto", 0
            event = first
            try:
                while True:
                    if event.kind == "done" and event.result is not None:
                        request_id = event.result.request_id or request_id
                    chunk = render_stream_chunk(event, request_id=request_id, model=model, tool_index=tools)
                    tools += event.kind == "tool_call"
                    yield f"data: {json.dumps(chunk)}\n\n".encode()
                    event = await events.__anext__()
            except StopAsyncIteration:
                pass
            except CompletionError as exc:  # mid-stream: the status is sent already; say it in the stream
                yield f"data: {json.dumps({'error': {'message': str(exc), 'type': 'api_error'}})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(body(), media_type="text/event-stream", headers=headers)


class Feedback(_Endpoint):
    """``POST /v1/feedback``: the caller rates one of their routed answers."""

    async def handle(self, request: Request) -> Response:
        try:
            request_id, quality = _rating(await request.body())
        except ValidationError as exc:
            return _error(400, f"bad request: {exc}", "invalid_request")
        if not self.runtime.available:
            return _error(503, NO_PROVIDER, "no_provider", "api_error")
        try:
            model = await self.runtime.planner.feedback(request_id, quality, current_user(self.local_user))
        except UnknownRequest as exc:
            return _error(404, str(exc), "request_not_found")
        except AlreadyRated as exc:
            return _error(409, str(exc), "already_rated")
        except HubError as exc:
            return _error(503, str(exc), "router_unavailable", "api_error")
        return JSONResponse({"request_id": request_id, "model": model, "quality": quality})


class _FeedbackBody(BaseModel):
    model_config = ConfigDict(strict=True)  # a JSON true is no rating

    request_id: str = Field(min_length=1)
    rating: Rating


def _rating(body: bytes) -> tuple[str, float]:
    """``request_id`` and the rating's quality; ``ValueError`` (pydantic's) names the fault."""
    parsed = _FeedbackBody.model_validate_json(body)
    return parsed.request_id, quality_of(parsed.rating)


def openai_routes(runtime: LlmRuntime, local_user: str, *, auth: bool, scopes: list[str] | None = None) -> list[Route]:
    """The routes to add to the MCP app; behind the bearer check when ``auth`` is on."""
    chat: ASGIApp = ChatCompletions(runtime, local_user)
    feedback: ASGIApp = Feedback(runtime, local_user)
    if auth:
        chat, feedback = RequireAuthMiddleware(chat, scopes or []), RequireAuthMiddleware(feedback, scopes or [])
    return [
        Route(CHAT_PATH, endpoint=chat, methods=["POST"]),
        Route(FEEDBACK_PATH, endpoint=feedback, methods=["POST"]),
    ]
