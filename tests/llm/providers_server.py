"""A scriptable loopback LLM provider for tests: OpenAI chat completions and Anthropic Messages in one app.

One Starlette app, served by uvicorn on a free loopback port in a background thread (its own event loop, so it
works whatever the test's event loop does). Every path is namespaced by a *deployment* name, so one server plays
any number of providers::

    POST /<deployment>/v1/chat/completions   OpenAI-compatible (streaming with "stream": true)
    POST /<deployment>/v1/messages           Anthropic Messages (streaming with "stream": true)

Use the ``provider_server`` fixture (module-scoped server, reset before each test)::

    def test_x(provider_server: ProviderServer) -> None:
        provider_server.script("a", Answer("hello", usage=(12, 3)), Fail(429, retry_after=0.01))
        base_url = provider_server.openai_url("a")      # http://127.0.0.1:PORT/a/v1
        ...                                            # or provider_server.anthropic_url("a") -> .../a
        [req] = provider_server.requests("a")           # every request: headers, parsed JSON body, api
        assert req.headers["authorization"] == "Bearer sk-test"

Outside ``tests/llm`` (whose conftest already does it), import both fixtures into your conftest or test module:
``from tests.llm.providers_server import _provider_server_module, provider_server``.

Behaviours are consumed in order per deployment; when a deployment's queue is empty it answers
``Answer("ok")``. Behaviours: :class:`Answer` (text and/or tool calls, usage, finish reason; streamed in
``chunks`` pieces when the request asks to stream), :class:`Fail` (any status, optional ``Retry-After``),
:class:`Hang` (wait before answering, to trip timeouts; a reset ends it), :class:`BadJson` (a 200 with a broken body),
:class:`StreamCut` (stream some text, then drop the connection), :class:`StreamError` (an in-stream error
event). The wire bodies are written here by hand, not with the gateway's own renderers, so translation bugs cannot
cancel out.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "Answer",
    "BadJson",
    "Fail",
    "Hang",
    "ProviderServer",
    "RecordedRequest",
    "StreamCut",
    "StreamError",
    "provider_server",
]

Api = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Answer:
    """A successful answer. ``tool_calls`` are ``(id, name, arguments)``; ``usage`` is ``(input, output)`` tokens.

    ``usage=None`` leaves usage out of the response (the client must count). ``chunks`` is how many text pieces a
    streamed answer is cut into.
    """

    text: str = ""
    tool_calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    usage: tuple[int, int] | None = (10, 5)
    finish: str | None = None
    chunks: int = 3
    model: str | None = None


@dataclass(frozen=True)
class Fail:
    """An error status with a provider-shaped error body; ``retry_after`` seconds set the ``Retry-After`` header."""

    status: int = 500
    message: str = "scripted failure"
    retry_after: float | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Wait ``seconds`` before answering with ``then`` (default ``Answer("late")``)."""

    seconds: float
    then: Answer | Fail | None = None


@dataclass(frozen=True)
class BadJson:
    """A 200 response whose body is not JSON."""


@dataclass(frozen=True)
class StreamCut:
    """Stream ``text`` (as deltas), then end the body without a final event, as a dropped connection does."""

    text: str = "partial"


@dataclass(frozen=True)
class StreamError:
    """A 200 event stream whose first event is an in-stream error (Anthropic ``overloaded_error``, OpenAI ``error``)."""

    message: str = "overloaded"


Behaviour = Answer | Fail | Hang | BadJson | StreamCut | StreamError


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    deployment: str
    api: Api
    path: str
    headers: dict[str, str]
    body: Any


class ProviderServer:
    """The state behind the app: a behaviour queue and a request log per deployment (thread-safe)."""

    def __init__(self) -> None:
        self.base = ""
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Behaviour]] = {}
        self._log: list[RecordedRequest] = []
        self._hangs: list[tuple[anyio.Event, Any]] = []

    def openai_url(self, deployment: str) -> str:
        """Base URL of an OpenAI-compatible provider (``.../v1``; the client appends ``/chat/completions``)."""
        return f"{self.base}/{deployment}/v1"

    def anthropic_url(self, deployment: str) -> str:
        """Base URL of an Anthropic provider (the client appends ``/v1/messages``)."""
        return f"{self.base}/{deployment}"

    def script(self, deployment: str, *behaviours: Behaviour) -> None:
        """Queue behaviours for ``deployment``, answered in order."""
        with self._lock:
            self._queues.setdefault(deployment, deque()).extend(behaviours)

    def requests(self, deployment: str | None = None) -> list[RecordedRequest]:
        """Requests received so far (for one deployment, or all), oldest first."""
        with self._lock:
            return [r for r in self._log if deployment is None or r.deployment == deployment]

    def pending(self, deployment: str) -> int:
        """Behaviours not consumed yet."""
        with self._lock:
            return len(self._queues.get(deployment, ()))

    def reset(self) -> None:
        """Forget every queue and recorded request."""
        with self._lock:
            self._queues.clear()
            self._log.clear()
        self.release_hangs()

    def release_hangs(self) -> None:
        """End every :class:`Hang` in progress now (called from outside the server's thread)."""
        with self._lock:
            hangs, self._hangs = self._hangs, []
        for event, token in hangs:
            anyio.from_thread.run_sync(event.set, token=token)

    def _take(self, record: RecordedRequest) -> Behaviour:
        with self._lock:
            self._log.append(record)
            queue = self._queues.get(record.deployment)
            return queue.popleft() if queue else Answer("ok")

    async def _handle(self, request: Request, api: Api) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        deployment = request.path_params["deployment"]
        headers = {k.lower(): v for k, v in request.headers.items()}
        behaviour = self._take(RecordedRequest(deployment, api, request.url.path, headers, body))
        stream = isinstance(body, dict) and body.get("stream") is True
        model = body.get("model", "unknown") if isinstance(body, dict) else "unknown"
        if isinstance(behaviour, Hang):
            await self._hang(behaviour.seconds)
            behaviour = behaviour.then or Answer("late")
        return await _respond(behaviour, api, stream=stream, model=str(model))

    async def _hang(self, seconds: float) -> None:
        event = anyio.Event()
        with self._lock:
            self._hangs.append((event, anyio.lowlevel.current_token()))
        with anyio.move_on_after(seconds):
            await event.wait()

    def app(self) -> Starlette:
        async def openai(request: Request) -> Response:
            return await self._handle(request, "openai")

        async def anthropic(request: Request) -> Response:
            return await self._handle(request, "anthropic")

        return Starlette(
            routes=[
                Route("/{deployment}/v1/chat/completions", openai, methods=["POST"]),
                Route("/{deployment}/v1/messages", anthropic, methods=["POST"]),
            ]
        )


async def _respond(behaviour: Behaviour, api: Api, *, stream: bool, model: str) -> Response:
    assert not isinstance(behaviour, Hang)
    if isinstance(behaviour, Fail):
        return _fail(behaviour, api)
    if isinstance(behaviour, BadJson):
        return Response("{not json", media_type="application/json")
    if isinstance(behaviour, StreamError):
        if api == "openai":
            return _sse(iter([(None, {"error": {"message": behaviour.message, "type": "server_error"}})]))
        error = {"type": "error", "error": {"type": "overloaded_error", "message": behaviour.message}}
        return _sse(iter([("error", error)]))
    if isinstance(behaviour, StreamCut):
        chunks = _openai_cut(behaviour, model) if api == "openai" else _anthropic_cut(behaviour, model)
        return _sse(chunks)
    if stream:
        events = _openai_stream(behaviour, model) if api == "openai" else _anthropic_stream(behaviour, model)
        return _sse(events)
    body = _openai_body(behaviour, model) if api == "openai" else _anthropic_body(behaviour, model)
    return JSONResponse(body)


def _fail(fail: Fail, api: Api) -> Response:
    headers = dict(fail.headers)
    if fail.retry_after is not None:
        headers["retry-after"] = f"{fail.retry_after:g}"
    if api == "openai":
        body: dict[str, Any] = {"error": {"message": fail.message, "type": "scripted", "code": fail.status}}
    else:
        body = {"type": "error", "error": {"type": "scripted_error", "message": fail.message}}
    return JSONResponse(body, status_code=fail.status, headers=headers)


def _sse(events: Iterator[tuple[str | None, Any]]) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for name, data in events:
            prefix = f"event: {name}\n" if name else ""
            payload = data if isinstance(data, str) else json.dumps(data)
            yield f"{prefix}data: {payload}\n\n".encode()
            await anyio.lowlevel.checkpoint()

    return StreamingResponse(body(), media_type="text/event-stream")


def _pieces(text: str, n: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i : i + size] for i in range(0, len(text), size)]


# ---- OpenAI wire format ----


def _openai_finish(answer: Answer) -> str:
    return answer.finish or ("tool_calls" if answer.tool_calls else "stop")


def _openai_body(answer: Answer, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in answer.tool_calls
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": answer.model or model,
        "choices": [{"index": 0, "message": message, "finish_reason": _openai_finish(answer)}],
    }
    if answer.usage is not None:
        pin, pout = answer.usage
        body["usage"] = {"prompt_tokens": pin, "completion_tokens": pout, "total_tokens": pin + pout}
    return body


def _openai_chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _openai_stream(answer: Answer, model: str) -> Iterator[tuple[str | None, Any]]:
    model = answer.model or model
    yield None, _openai_chunk(model, {"role": "assistant", "content": ""})
    for piece in _pieces(answer.text, answer.chunks):
        yield None, _openai_chunk(model, {"content": piece})
    for index, (call_id, name, args) in enumerate(answer.tool_calls):
        text = json.dumps(args)
        half = len(text) // 2
        first = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        yield None, _openai_chunk(model, {"tool_calls": [first]})
        for part in (text[:half], text[half:]):
            yield None, _openai_chunk(model, {"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    yield None, _openai_chunk(model, {}, _openai_finish(answer))
    if answer.usage is not None:
        pin, pout = answer.usage
        usage = {"prompt_tokens": pin, "completion_tokens": pout, "total_tokens": pin + pout}
        yield (
            None,
            {"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": usage},
        )
    yield None, "[DONE]"


def _openai_cut(cut: StreamCut, model: str) -> Iterator[tuple[str | None, Any]]:
    yield None, _openai_chunk(model, {"role": "assistant", "content": ""})
    for piece in _pieces(cut.text, 2):
        yield None, _openai_chunk(model, {"content": piece})


# ---- Anthropic wire format ----

_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _anthropic_stop(answer: Answer) -> str:
    if answer.finish:
        return _ANTHROPIC_STOP.get(answer.finish, answer.finish)
    return "tool_use" if answer.tool_calls else "end_turn"


def _anthropic_body(answer: Answer, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.text:
        content.append({"type": "text", "text": answer.text})
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in answer.tool_calls]
    body: dict[str, Any] = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": answer.model or model,
        "content": content,
        "stop_reason": _anthropic_stop(answer),
        "stop_sequence": None,
    }
    if answer.usage is not None:
        body["usage"] = {"input_tokens": answer.usage[0], "output_tokens": answer.usage[1]}
    return body


def _anthropic_start(model: str, input_tokens: int) -> tuple[str, Any]:
    message: dict[str, Any] = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    return "message_start", {"type": "message_start", "message": message}


def _anthropic_stream(answer: Answer, model: str) -> Iterator[tuple[str | None, Any]]:
    usage = answer.usage or (0, 0)
    yield _anthropic_start(answer.model or model, usage[0])
    yield "ping", {"type": "ping"}
    index = 0
    if answer.text:
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        for piece in _pieces(answer.text, answer.chunks):
            delta = {"type": "text_delta", "text": piece}
            yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    for offset, (call_id, name, args) in enumerate(answer.tool_calls):
        i = index + offset
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": block}
        text = json.dumps(args)
        half = len(text) // 2
        for part in (text[:half], text[half:]):
            delta = {"type": "input_json_delta", "partial_json": part}
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    stop: dict[str, Any] = {"stop_reason": _anthropic_stop(answer), "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": usage[1]}}
    yield "message_stop", {"type": "message_stop"}


def _anthropic_cut(cut: StreamCut, model: str) -> Iterator[tuple[str | None, Any]]:
    yield _anthropic_start(model, 1)
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    for piece in _pieces(cut.text, 2):
        delta = {"type": "text_delta", "text": piece}
        yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}


# ---- serving ----


class _Serving:
    """uvicorn in a daemon thread with its own event loop, on a socket bound before it starts."""

    def __init__(self, state: ProviderServer) -> None:
        self.state = state
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        state.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            state.app(), log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=1
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name="provider-server", daemon=True)

    def _run(self) -> None:
        anyio.run(self.server.serve, [self.sock])

    def __enter__(self) -> _Serving:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.state.release_hangs()  # so shutdown does not wait for them
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture(scope="module")
def _provider_server_module() -> Iterator[ProviderServer]:
    state = ProviderServer()
    with _Serving(state):
        yield state


@pytest.fixture
def provider_server(_provider_server_module: ProviderServer) -> ProviderServer:
    """The module's loopback provider server, with empty queues and request logs."""
    _provider_server_module.reset()
    return _provider_server_module
