"""The request log: one JSON line per gateway request in ``<home>/logs/llm.jsonl``, secrets redacted.

Each line holds the model, provider, tokens, cost, latency, every attempt's outcome and the caller. Prompt and
answer text are left out unless ``llm.log_prompts`` is set. Values of known secrets (API keys, vault values) are
replaced by ``[redacted:NAME]`` wherever they appear, and header-like fields (``authorization``, ``x-api-key``,
``api_key``...) are dropped whatever their value.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio

from hanzo_hub.line_log import LineLog
from hanzo_hub.llm.types import Caller, ChatRequest, ChatResult
from hanzo_hub.llm.usage import usd
from hanzo_hub.sandbox.vault import Redactor

__all__ = ["LOG_FILE", "SECRET_KEYS", "RequestLog"]

LOG_FILE = "llm.jsonl"
SECRET_KEYS = frozenset({"authorization", "x-api-key", "api-key", "api_key", "apikey", "proxy-authorization"})


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if str(k).lower() not in SECRET_KEYS}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


class RequestLog:
    """Appends request entries to ``directory/llm.jsonl`` off the event loop.

    Args:
        directory: the hub's log directory (``<home>/logs``).
        secrets: name -> value of every secret to redact (API keys, vault values).
        log_prompts: include the request's messages and the answer's text.
    """

    def __init__(self, directory: Path, secrets: Mapping[str, str] | None = None, *, log_prompts: bool = False) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.file = directory / LOG_FILE
        self.redactor = Redactor(secrets or {})
        self.log_prompts = log_prompts
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        self._log = LineLog(self.file, what="the request log", keep_open=False)  # a full disk drops lines, warns once

    def _base(self, request_id: str, caller: Caller, request: ChatRequest, stream: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "request_id": request_id,
            "user": caller.user,
            "project": caller.project,
            "requested_model": request.model,
            "stream": stream,
        }
        if self.log_prompts:
            entry["messages"] = [m.model_dump(mode="json") for m in request.messages]
        return entry

    async def write_result(
        self,
        request_id: str,
        caller: Caller,
        request: ChatRequest,
        result: ChatResult,
        cost: Decimal,
        attempts: Sequence[Mapping[str, Any]],
        stream: bool,
    ) -> None:
        """Log an answered request."""
        entry = self._base(request_id, caller, request, stream)
        entry.update(
            outcome="ok",
            model=result.model,
            provider=result.provider,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            cost_usd=usd(cost),
            latency_ms=result.latency_ms,
            finish_reason=result.finish_reason,
            reason=result.reason,
            attempts=list(attempts),
        )
        if self.log_prompts:
            entry["answer"] = result.message.model_dump(mode="json")
        await self._write(entry)

    async def write_failure(
        self,
        request_id: str,
        caller: Caller,
        request: ChatRequest,
        outcome: str,
        error: BaseException,
        attempts: Sequence[Mapping[str, Any]],
        stream: bool,
        *,
        partial: ChatResult | None = None,
        cost: Decimal | None = None,
    ) -> None:
        """Log a refused (``outcome="refused"``), failed (``"error"``) or abandoned stream (``"abandoned"``).

        ``partial`` is what a broken stream delivered before it ended, charged at ``cost``.
        """
        entry = self._base(request_id, caller, request, stream)
        entry.update(outcome=outcome, error_type=type(error).__name__, error=str(error), attempts=list(attempts))
        if partial is not None:
            entry.update(
                model=partial.model,
                provider=partial.provider,
                input_tokens=partial.usage.input_tokens,
                output_tokens=partial.usage.output_tokens,
                cost_usd=usd(cost if cost is not None else Decimal(0)),
            )
            if self.log_prompts:
                entry["answer"] = partial.message.model_dump(mode="json")
        await self._write(entry)

    async def _write(self, entry: dict[str, Any]) -> None:
        line = self.redactor.redact(json.dumps(_scrub(entry), ensure_ascii=False, default=str))
        await anyio.to_thread.run_sync(self._append, line, limiter=self._limiter)

    def _append(self, line: str) -> None:
        with self._lock:
            self._log.write((line + "\n").encode())
