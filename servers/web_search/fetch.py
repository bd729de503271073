"""Fetching pages: one bounded request (timeout, byte cap, redirects followed) whose failures become ToolErrors, and
the HTML of a tool's url-or-html arguments."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2

from servers._common import ToolError

USER_AGENT = "hanzo-web-search/1"
DEFAULT_TIMEOUT = 20.0
MAX_PAGE_BYTES = 5_000_000
T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    """A fetched document."""

    url: str
    status: int
    content_type: str
    body: bytes
    truncated: bool

    @property
    def is_html(self) -> bool:
        return "html" in self.content_type or (not self.content_type and self.body.lstrip()[:1] == b"<")

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


@contextlib.asynccontextmanager
async def session(timeout: float = DEFAULT_TIMEOUT) -> AsyncIterator[httpx2.AsyncClient]:
    """A client for one tool call (no environment proxies: the hub's policy governs URLs)."""
    async with httpx2.AsyncClient(
        timeout=timeout, follow_redirects=True, trust_env=False, headers={"User-Agent": USER_AGENT}
    ) as http:
        yield http


async def get(http: httpx2.AsyncClient, url: str, max_bytes: int = MAX_PAGE_BYTES) -> Page:
    """GET ``url`` reading at most ``max_bytes``."""
    return await send(http, "GET", url, max_bytes)


async def send(http: httpx2.AsyncClient, method: str, url: str, max_bytes: int = MAX_PAGE_BYTES, **body: Any) -> Page:
    """Send ``method`` to ``url`` (``body``: httpx content/files/headers) reading at most ``max_bytes``."""
    try:
        async with http.stream(method, url, **body) as response:
            chunks, size, truncated = [], 0, False
            async for chunk in response.aiter_bytes():
                if size + len(chunk) > max_bytes:
                    chunks.append(chunk[: max_bytes - size])
                    truncated = True
                    break
                chunks.append(chunk)
                size += len(chunk)
            return Page(str(response.url), response.status_code, response.headers.get("content-type", ""),
                        b"".join(chunks), truncated)  # fmt: skip
    except httpx2.TimeoutException as exc:
        raise ToolError(f"{method} {url} timed out") from exc
    except httpx2.ConnectError as exc:
        raise ToolError(f"cannot connect to {url}: {exc}") from exc
    except httpx2.HTTPError as exc:
        raise ToolError(f"{method} {url} failed: {type(exc).__name__}: {exc}") from exc


async def get_ok(http: httpx2.AsyncClient, url: str, max_bytes: int = MAX_PAGE_BYTES) -> Page:
    """GET ``url`` and insist on a 2xx answer."""
    page = await get(http, url, max_bytes)
    if not 200 <= page.status < 300:
        raise ToolError(f"GET {url} answered {page.status}")
    return page


async def html_of(url: str, html: str) -> tuple[str, str]:
    """(html, base URL) from the html argument, or by fetching url."""
    if html:
        return html, url or "http://localhost/"
    if not url:
        raise ToolError("give url or html")
    async with session() as http:
        page = await get_ok(http, url)
    if not page.is_html:
        raise ToolError(f"{url} is {page.content_type or 'not HTML'}, not an HTML page")
    return page.text(), page.url


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Parse HTML in a worker thread (a large page takes long enough to stall other calls)."""
    return await anyio.to_thread.run_sync(fn, *args)
