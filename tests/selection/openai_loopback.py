"""A loopback OpenAI-compatible chat server for stage-2 tests, and a minimal ``Completer`` that talks to it.

The server's "model" is a deterministic reader of the filter's prompt: it keeps the candidates whose line shares a
word with the request, in reverse order, and adds an id that is not a candidate. Its behaviour is chosen by the
requested model name: ``keyword`` (that), ``prose`` (an answer without a JSON list), ``slow`` (answers after 5 s),
``broken`` (HTTP 500). Every request body is recorded.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from hanzo_hub.errors import CompletionError
from hanzo_hub.llm.types import Caller, ChatMessage, ChatRequest, ChatResult, StreamEvent

_LINE = re.compile(r"^(t\d+): (.*)$", re.MULTILINE)
_WORD = re.compile(r"[a-z]{4,}")


def keyword_answer(prompt: str) -> str:
    request = prompt.split("\n", 1)[0].lower()
    words = set(_WORD.findall(request))
    kept = [tid for tid, line in _LINE.findall(prompt) if words & set(_WORD.findall(line.lower()))]
    return "Here you go: " + json.dumps([*reversed(kept), "t999"])


class LoopbackOpenAI:
    """The app plus what it received."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(body)
        model = body.get("model") or "keyword"
        if model == "broken":
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)
        if model == "slow":
            await anyio.sleep(5)
        prompt = body["messages"][-1]["content"]
        text = keyword_answer(prompt) if model != "prose" else "I would use the weather tools."
        return JSONResponse(
            {
                "id": "cmpl-1",
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            }
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_loopback() -> Iterator[tuple[str, LoopbackOpenAI]]:
    """Run the server on a free loopback port in a thread; yields its base URL."""
    app = LoopbackOpenAI()
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("loopback OpenAI server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1", app
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class OpenAICompatCompleter:
    """The smallest ``Completer`` over an OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(self, base_url: str, model: str) -> None:
        self._base = base_url
        self._model = model

    async def chat(self, request: ChatRequest, *, caller: Caller) -> ChatResult:
        body = {
            "model": request.model or self._model,
            "messages": [{"role": m.role, "content": m.text()} for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(f"{self._base}/chat/completions", json=body)
        if response.status_code != 200:
            raise CompletionError(f"HTTP {response.status_code}")
        data = response.json()
        text = data["choices"][0]["message"]["content"]
        return ChatResult(model=data["model"], provider="loopback", message=ChatMessage(role="assistant", content=text))

    async def stream(self, request: ChatRequest, *, caller: Caller) -> AsyncIterator[StreamEvent]:
        result = await self.chat(request, caller=caller)
        yield StreamEvent(kind="done", result=result)
