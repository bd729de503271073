"""Helpers shared by the system tool modules: worker threads for psutil and common annotations."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import anyio.to_thread
from mcp_types import ToolAnnotations

__all__ = ["LIMITER", "READ_ONLY", "READ_ONLY_OPEN", "off_loop"]

P = ParamSpec("P")
T = TypeVar("T")

LIMITER = anyio.CapacityLimiter(4)
"""psutil and socket calls block; at most this many run at once in worker threads."""

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
READ_ONLY_OPEN = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking call in a worker thread (bounded by ``LIMITER``)."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=LIMITER)


def rounded(value: Any, digits: int = 2) -> Any:
    """Floats rounded for readable results; other values unchanged."""
    return round(value, digits) if isinstance(value, float) else value
