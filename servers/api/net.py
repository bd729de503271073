"""The HTTP plumbing every api tool shares: one bounded client per call, capped bodies, readable results.

Bodies are read in a stream up to ``max_bytes`` (the rest is dropped and the result says ``truncated``); every call
has a timeout; transport failures become a :class:`ToolError` naming the URL and what to check.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Annotated, Any

import httpx2
from pydantic import Field

from servers._common import ToolError

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 1_000_000
HARD_MAX_BYTES = 50_000_000
USER_AGENT = "hanzo-hub-api/1"

Url = Annotated[str, Field(pattern=r"^https?://\S+$", description="absolute http(s) URL")]
Headers = Annotated[
    dict[str, str] | None, Field(description="extra request headers, e.g. {'Authorization': 'Bearer ...'}")
]
Query = Annotated[
    dict[str, str | int | float | bool] | None, Field(description="query-string parameters added to the URL")
]
Timeout = Annotated[float, Field(gt=0, le=300, description="seconds before the request is abandoned")]
MaxBytes = Annotated[
    int, Field(ge=1, le=HARD_MAX_BYTES, description="response bytes kept; the rest is dropped (truncated=true)")
]
JsonBody = Annotated[Any, Field(description="a JSON value sent as the body (Content-Type: application/json)")]
TextBody = Annotated[str, Field(description="a raw text body, sent as is (instead of json); '' = none")]
# Text arguments are typed plain ``str`` (empty = not given): the SDK JSON-decodes string values of any other
# annotation, which would turn a JSON text body into an object.


@contextlib.contextmanager
def mapped_errors(url: str) -> Iterator[None]:
    """Turn httpx2 transport errors into ToolErrors that say what failed and what to check."""
    try:
        yield
    except httpx2.TimeoutException as exc:
        raise ToolError(
            f"request to {url} timed out ({type(exc).__name__}); raise timeout or check the server"
        ) from exc
    except httpx2.ConnectError as exc:
        raise ToolError(f"cannot connect to {url}: {exc}; is the server running and the URL right?") from exc
    except httpx2.TooManyRedirects as exc:
        raise ToolError(f"too many redirects from {url}") from exc
    except httpx2.InvalidURL as exc:
        raise ToolError(f"invalid URL {url!r}: {exc}") from exc
    except httpx2.HTTPError as exc:
        raise ToolError(f"HTTP request to {url} failed: {type(exc).__name__}: {exc}") from exc


@contextlib.asynccontextmanager
async def client(timeout: float = DEFAULT_TIMEOUT, follow_redirects: bool = True) -> AsyncIterator[httpx2.AsyncClient]:
    """A short-lived client with a bounded timeout (no environment proxies: the hub's policy governs URLs)."""
    async with httpx2.AsyncClient(
        timeout=timeout, follow_redirects=follow_redirects, trust_env=False, headers={"User-Agent": USER_AGENT}
    ) as http:
        yield http


class Fetched:
    """A response whose body was read up to a byte cap."""

    def __init__(self, response: httpx2.Response, body: bytes, truncated: bool, elapsed_ms: float) -> None:
        self.response = response
        self.body = body
        self.truncated = truncated
        self.elapsed_ms = elapsed_ms

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def content_type(self) -> str:
        return self.response.headers.get("content-type", "")

    def text(self) -> str:
        return self.body.decode(self.response.encoding or "utf-8", errors="replace")

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ToolError(
                f"{self.response.url} did not answer JSON ({self.content_type or 'no content type'})"
            ) from exc

    def summary(self, *, include_body: bool = True) -> dict[str, Any]:
        """Status, headers, timing and the body (JSON parsed, text decoded, binary as size + base64 prefix)."""
        out: dict[str, Any] = {
            "status": self.status,
            "reason": self.response.reason_phrase,
            "url": str(self.response.url),
            "httpVersion": self.response.http_version,
            "elapsedMs": round(self.elapsed_ms, 1),
            "headers": dict(self.response.headers),
            "bytes": len(self.body),
            "truncated": self.truncated,
        }
        if include_body:
            out.update(body_fields(self.body, self.content_type, self.truncated, self.response.encoding))
        return out


def body_fields(body: bytes, content_type: str, truncated: bool, encoding: str | None = None) -> dict[str, Any]:
    """How a body shows in a result: ``json`` when it parses, ``text`` when it decodes, ``base64`` otherwise."""
    if not body:
        return {}
    if "json" in content_type and not truncated:
        with contextlib.suppress(ValueError):
            return {"json": json.loads(body)}
    try:
        return {"text": body.decode(encoding or "utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body[:4096]).decode("ascii"), "binary": True}


async def fetch(
    http: httpx2.AsyncClient,
    method: str,
    url: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    **kwargs: Any,
) -> Fetched:
    """Send one request and read at most ``max_bytes`` of its body."""
    started = time.perf_counter()
    with mapped_errors(url):
        async with http.stream(method, url, **kwargs) as response:
            chunks: list[bytes] = []
            size = 0
            truncated = False
            async for chunk in response.aiter_bytes():
                if size + len(chunk) > max_bytes:
                    chunks.append(chunk[: max_bytes - size])
                    truncated = True
                    break
                chunks.append(chunk)
                size += len(chunk)
    return Fetched(response, b"".join(chunks), truncated, (time.perf_counter() - started) * 1000)


def request_kwargs(
    headers: Mapping[str, str] | None,
    params: Mapping[str, Any] | None,
    json_body: Any = None,
    text_body: str | None = None,
) -> dict[str, Any]:
    """httpx2 keyword arguments for the common request options; json and text bodies exclude each other."""
    text_body = text_body or None
    if json_body is not None and text_body is not None:
        raise ToolError("give either json or body, not both")
    kwargs: dict[str, Any] = {}
    if headers:
        kwargs["headers"] = dict(headers)
    if params:
        kwargs["params"] = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()}
    if json_body is not None:
        kwargs["json"] = json_body
    elif text_body is not None:
        kwargs["content"] = text_body.encode()
    return kwargs


def json_bytes(value: Any) -> bytes:
    """A JSON value as UTF-8 bytes (a str is taken as already-serialised text)."""
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()
