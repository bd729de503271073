"""Load API documents (OpenAPI specs) from a URL, a local file or inline text, with a small cache.

A source is cached by URL (5 minutes), by path and modification time, or by the text's hash; ``refresh`` skips it.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import yaml
from pydantic import Field

from servers._common import ToolError
from servers.api import net

CACHE_SECONDS = 300.0
CACHE_SIZE = 32
MAX_SPEC_BYTES = 20_000_000

Source = Annotated[
    str,
    Field(
        min_length=1,
        description="the document: an http(s) URL, a local file path, or the JSON/YAML text itself",
    ),
]

_cache: dict[str, tuple[float, Any]] = {}


def parse_text(text: str, origin: str) -> Any:
    """JSON or YAML text → a Python value (YAML is a superset, JSON tried first for speed)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ToolError(f"{origin} is neither JSON nor YAML: {exc}") from exc


def _remember(key: str, value: Any) -> Any:
    if len(_cache) >= CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    _cache[key] = (time.monotonic(), value)
    return value


async def load_document(source: str, *, refresh: bool = False, headers: dict[str, str] | None = None) -> Any:
    """The parsed document at ``source`` (URL, path or inline text)."""
    source = source.strip()
    if source.startswith(("http://", "https://")):
        key = f"url:{source}"
        hit = _cache.get(key)
        if hit and not refresh and time.monotonic() - hit[0] < CACHE_SECONDS:
            return hit[1]
        async with net.client() as http:
            fetched = await net.fetch(http, "GET", source, max_bytes=MAX_SPEC_BYTES, headers=headers or {})
        if fetched.status >= 400:
            raise ToolError(f"GET {source} answered {fetched.status}")
        return _remember(key, parse_text(fetched.text(), source))
    if "\n" not in source and len(source) < 4096 and not source.lstrip().startswith(("{", "[")):
        apath = await anyio.Path(source).expanduser()
        path = Path(apath)
        if not await apath.is_file():
            raise ToolError(f"no file at {path} (give a URL, a path or the document text)")
        key = f"path:{await apath.resolve()}:{(await apath.stat()).st_mtime_ns}"
        hit = _cache.get(key)
        if hit and not refresh:
            return hit[1]
        return _remember(key, parse_text(await anyio.Path(path).read_text(), str(path)))
    key = "text:" + hashlib.sha256(source.encode()).hexdigest()
    hit = _cache.get(key)
    if hit and not refresh:
        return hit[1]
    return _remember(key, parse_text(source, "the inline document"))


def base_of(source: str) -> str | None:
    """The URL a relative server URL is resolved against (the spec's own URL), if the source is one."""
    return source.strip() if source.strip().startswith(("http://", "https://")) else None
