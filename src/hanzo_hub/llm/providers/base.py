"""What every provider module implements, and the one place HTTP failures become :class:`ProviderError`.

A provider translates the neutral :mod:`hanzo_hub.llm.types` into one API family's wire format and back. It does
one attempt; retries, failover, cooldown, budgets and cost belong to the gateway. Errors are classified here:
429, 408, 409, 5xx and 529 (overloaded), timeouts, dropped connections and unreadable bodies are *retryable*;
other 4xx are not (``status`` tells a bad request, 400/413/422, from a bad deployment, 401/403/404).
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx2

from hanzo_hub.errors import ProviderError
from hanzo_hub.llm.registry import ModelSpec
from hanzo_hub.llm.types import ChatRequest, ChatResult, StreamEvent

__all__ = [
    "REQUEST_ERROR_STATUSES",
    "RETRYABLE_STATUSES",
    "Deployment",
    "Provider",
    "error_from_response",
    "map_http_errors",
    "invalid_response",
    "parse_retry_after",
]

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
REQUEST_ERROR_STATUSES = frozenset({400, 413, 422})
"""The request itself is at fault: another deployment would refuse it too, so the gateway does not fail over."""
MAX_ERROR_TEXT = 300


@dataclass(frozen=True, slots=True)
class Deployment:
    """One configured provider: its name, API family, base URL, key (resolved from the vault) and timeout."""

    name: str
    api: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 60.0

    def url(self, path: str) -> str:
        """``base_url`` joined with ``path``."""
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")


class Provider(Protocol):
    """One API family. ``model.id`` is what the provider is asked for (its ``upstream`` name when set)."""

    async def chat(self, deployment: Deployment, request: ChatRequest, model: ModelSpec) -> ChatResult:
        """One non-streamed attempt; ``cost_usd``, ``attempts`` and ``request_id`` are left for the gateway.

        Raises:
            ProviderError: the attempt failed (``retryable`` says whether another may succeed).
        """
        ...

    def stream(self, deployment: Deployment, request: ChatRequest, model: ModelSpec) -> AsyncIterator[StreamEvent]:
        """One streamed attempt: text and tool-call events, then one ``done`` event carrying the result.

        Raises:
            ProviderError: the attempt failed, before or during the stream.
        """
        ...


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP date), or ``None``."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_text(body: bytes) -> str:
    try:
        data: Any = json.loads(body)
    except ValueError:
        return body.decode(errors="replace")[:MAX_ERROR_TEXT]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:MAX_ERROR_TEXT]
    if isinstance(error, str):
        return error[:MAX_ERROR_TEXT]
    return json.dumps(data)[:MAX_ERROR_TEXT]


def error_from_response(provider: str, status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
    """The :class:`ProviderError` for an HTTP error response."""
    return ProviderError(
        provider,
        f"HTTP {status}: {_error_text(body)}",
        retryable=status in RETRYABLE_STATUSES or status >= 500,
        status=status,
        retry_after=parse_retry_after(headers),
    )


def invalid_response(provider: str, what: str) -> ProviderError:
    """A response the provider module cannot read (retryable: a proxy or a flaky server may do better)."""
    return ProviderError(provider, f"invalid response: {what}", retryable=True)


@contextmanager
def map_http_errors(provider: str) -> Iterator[None]:
    """Translate httpx2 transport failures into retryable :class:`ProviderError` (the key never appears)."""
    try:
        yield
    except httpx2.TimeoutException as exc:
        raise ProviderError(provider, f"timed out ({type(exc).__name__})", retryable=True) from exc
    except httpx2.RequestError as exc:
        raise ProviderError(provider, f"connection failed ({type(exc).__name__})", retryable=True) from exc


async def post_json(
    http: httpx2.AsyncClient, deployment: Deployment, path: str, body: dict[str, Any], headers: dict[str, str]
) -> Any:
    """POST ``body`` to ``deployment``'s ``path`` and return the decoded JSON answer.

    Raises:
        ProviderError: a transport failure, an error status (with ``Retry-After``), or a body that is not JSON.
    """
    with map_http_errors(deployment.name):
        response = await http.post(deployment.url(path), json=body, headers=headers, timeout=deployment.timeout)
    if response.status_code >= 400:
        raise error_from_response(deployment.name, response.status_code, response.headers, response.content)
    try:
        return response.json()
    except ValueError as exc:
        raise invalid_response(deployment.name, "body is not JSON") from exc
