"""Corrections to downstream results: servers that report failures as plain text get ``isError`` set.

Some servers (redis-mcp-server, awslabs' Memcached and Valkey servers) answer a failed operation with a normal
result whose text says it failed, so a client cannot tell failure from success. A server's ``error_patterns``
(from its spec, or its catalog manifest's ``errorPatterns``) are regular expressions matched from the start of the
result's first text block; a match marks the result as an error, text unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TypeVar

import mcp_types as types

R = TypeVar("R")


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


def flag_text_errors(result: R, patterns: Sequence[str]) -> R:
    """``result`` with ``isError`` set when it is a successful tool result whose text matches one of ``patterns``."""
    if not patterns or not isinstance(result, types.CallToolResult) or result.is_error:
        return result
    first = next((block.text for block in result.content if isinstance(block, types.TextContent)), None)
    if first is None or not any(p.match(first) for p in _compiled(tuple(patterns))):
        return result
    flagged: R = result.model_copy(update={"is_error": True})
    return flagged
