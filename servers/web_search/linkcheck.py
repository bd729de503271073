"""Checking links: each unique URL once (HEAD, then GET when HEAD is refused), bounded concurrency, a timeout per
link and one for the whole check; broken means a 4xx/5xx answer, a timeout or no connection."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

HEAD_REFUSED = {403, 405, 501}


@dataclass(frozen=True)
class CheckLimits:
    """Bounds of one link check."""

    concurrency: int
    timeout: float
    max_seconds: float


async def check_one(http: httpx2.AsyncClient, url: str, timeout: float) -> dict[str, Any]:
    """The outcome of one link: status, final URL, redirect count, ok/broken and the error if any."""
    started = time.monotonic()
    result: dict[str, Any] = {"url": url, "status": None, "finalUrl": None, "redirects": 0, "error": None}
    try:
        with anyio.fail_after(timeout):
            response = await http.request("HEAD", url, follow_redirects=True)
            if response.status_code in HEAD_REFUSED:
                async with http.stream("GET", url, follow_redirects=True) as streamed:
                    response = streamed
        result.update(status=response.status_code, finalUrl=str(response.url), redirects=len(response.history))
    except (TimeoutError, httpx2.TimeoutException):
        result["error"] = f"timeout after {timeout} s"
    except httpx2.ConnectError as exc:
        result["error"] = f"cannot connect: {exc}"
    except httpx2.TooManyRedirects:
        result["error"] = "too many redirects"
    except httpx2.HTTPError as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    result["ok"] = result["error"] is None and result["status"] < 400
    result["ms"] = round((time.monotonic() - started) * 1000, 1)
    return result


async def check_all(
    http: httpx2.AsyncClient, urls: list[str], limits: CheckLimits
) -> tuple[list[dict[str, Any]], bool]:
    """Check ``urls`` (in order of the result) at most ``concurrency`` at a time; (results, finished in time)."""
    results: dict[str, dict[str, Any]] = {}
    limiter = anyio.CapacityLimiter(limits.concurrency)

    async def one(url: str) -> None:
        async with limiter:
            results[url] = await check_one(http, url, limits.timeout)

    with anyio.move_on_after(limits.max_seconds) as scope:
        async with anyio.create_task_group() as group:
            for url in urls:
                group.start_soon(one, url)
    checked = [results[u] for u in urls if u in results]
    return checked, not scope.cancelled_caught


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of a check: checked, ok, broken, redirected, timeouts and per-status."""
    by_status: dict[str, int] = {}
    for r in results:
        key = str(r["status"]) if r["status"] is not None else "error"
        by_status[key] = by_status.get(key, 0) + 1
    return {"checked": len(results), "ok": sum(r["ok"] for r in results),
            "broken": sum(not r["ok"] for r in results), "redirected": sum(r["redirects"] > 0 for r in results),
            "timeouts": sum(bool(r["error"] and r["error"].startswith("timeout")) for r in results),
            "byStatus": by_status}  # fmt: skip
