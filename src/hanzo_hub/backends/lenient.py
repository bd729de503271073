"""Lists whose items break the protocol: repaired where the intent is plain, dropped one by one otherwise.

The SDK validates a list result as a whole against the negotiated protocol version, so one tool with an
``inputSchema`` lacking ``"type": "object"`` (common in hand-written servers), or ``"properties": []`` (PHP's empty
dict), fails the server's whole ``tools/list`` and with it the server's start. And an item that passed a lenient
reader (an older snapshot, a downstream of the other era) but not the strict surface of the era a client speaks
makes the hub's own merged ``tools/list`` fail for every client. So:

- :func:`checked` validates a list against the strict surface of every era the hub serves, at once (the common
  case: nothing to do), and only when that fails item by item, repairing or dropping each bad item with a warning;
- :func:`lenient_page` fetches one page of a list raw, past the SDK's all-or-nothing check, and keeps what
  :func:`checked` keeps. It reaches two private members of the SDK's ``ClientSession`` (``_stamp``, which puts the
  era's ``_meta`` and headers on a request, and ``_dispatcher``); the SDK is pinned, and
  ``tests/backends/test_malformed_lists.py`` fails if either moves.

Repairs, tools only: a missing or non-object ``inputSchema`` becomes ``{"type": "object"}``; a schema without a
``type`` gets ``"type": "object"``; empty-list ``properties`` become ``{}``; an ``outputSchema`` that is not a valid
object schema is removed (clients then skip validating the tool's structured content). Anything else that fails is
dropped, and so is a second item of a name (or URI) already listed: clients refuse a list naming a tool twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import mcp_types as types
from mcp import Client
from mcp_types import methods as _methods
from pydantic import BaseModel, ValidationError

from hanzo_hub.errors import BackendError

logger = logging.getLogger(__name__)

__all__ = ["LIST_METHODS", "Problems", "checked", "checked_dicts", "lenient_page"]

ERAS = ("2025-11-25", "2026-07-28")
"""The eras the hub serves; a listed item must be valid in each."""

_ENVELOPES: dict[str, dict[str, Any]] = {
    "2025-11-25": {},
    "2026-07-28": {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"},
}

LIST_METHODS: dict[str, tuple[str, type[BaseModel], type[types.Request[Any, Any]]]] = {
    "tools/list": ("tools", types.Tool, types.ListToolsRequest),
    "resources/list": ("resources", types.Resource, types.ListResourcesRequest),
    "resources/templates/list": ("resourceTemplates", types.ResourceTemplate, types.ListResourceTemplatesRequest),
    "prompts/list": ("prompts", types.Prompt, types.ListPromptsRequest),
}
"""Per list method: the result's key, the item model, the request model."""

_IDENTITY = {
    "tools/list": "name",
    "resources/list": "uri",
    "resources/templates/list": "uriTemplate",
    "prompts/list": "name",
}
"""The wire field that names an item; a second item with a name already listed is dropped."""

M = TypeVar("M", bound=BaseModel)


class Problems:
    """What was repaired or dropped of one server's lists: each logged as a warning and kept, in words, for the
    listing (the status resource and ``hanzo-hub doctor --probe`` show them)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.notes: list[str] = []

    def add(self, text: str) -> None:
        logger.warning("server %s: %s", self.server, text)
        self.notes.append(text)


def _problem(method: str, items: Sequence[dict[str, Any]]) -> str | None:
    """Why ``items`` do not make a valid ``method`` result in some era (``None``: valid in all)."""
    key = LIST_METHODS[method][0]
    for era in ERAS:
        try:
            _methods.validate_server_result(method, era, {**_ENVELOPES[era], key: list(items)})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"][2:]) or "item"
            return f"{where}: {first['msg']}"
    return None


def _object_schema(schema: Any) -> dict[str, Any]:
    fixed = dict(schema) if isinstance(schema, dict) else {}
    fixed.setdefault("type", "object")
    if fixed.get("properties") == []:
        fixed["properties"] = {}
    return fixed


def _repaired_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fixed = {**tool, "inputSchema": _object_schema(tool.get("inputSchema"))}
    if "outputSchema" in fixed and _problem("tools/list", [{**fixed, "inputSchema": {"type": "object"}}]):
        del fixed["outputSchema"]
    return fixed


def _item_name(item: dict[str, Any]) -> str:
    return str(item.get("name") or item.get("uri") or item.get("uriTemplate") or "?")[:80]


def checked_dicts(method: str, items: Sequence[dict[str, Any]], problems: Problems) -> list[dict[str, Any]]:
    """``items`` (wire dicts) that are valid in every era, repairing tools where the intent is plain."""
    if _problem(method, items) is None:
        return _unique(method, list(items), problems)
    kept: list[dict[str, Any]] = []
    what = LIST_METHODS[method][0].rstrip("s")
    for item in items:
        problem = _problem(method, [item]) if isinstance(item, dict) else "not an object"
        if problem is None:
            kept.append(item)
            continue
        if method == "tools/list" and isinstance(item, dict):
            fixed = _repaired_tool(item)
            if _problem(method, [fixed]) is None:
                problems.add(f"{what} {_item_name(item)!r} repaired ({problem})")
                kept.append(fixed)
                continue
        name = _item_name(item) if isinstance(item, dict) else "?"
        problems.add(f"{what} {name!r} dropped, it breaks the protocol ({problem})")
    return _unique(method, kept, problems)


def _unique(method: str, items: list[dict[str, Any]], problems: Problems) -> list[dict[str, Any]]:
    """``items`` less those whose name (uri) an earlier item has: clients refuse a list naming a tool twice."""
    field = _IDENTITY[method]
    seen: set[Any] = set()
    kept: list[dict[str, Any]] = []
    for item in items:
        if item.get(field) in seen:
            what = LIST_METHODS[method][0].rstrip("s")
            problems.add(f"a second {what} {_item_name(item)!r} dropped, the first is kept")
            continue
        seen.add(item.get(field))
        kept.append(item)
    return kept


def checked(method: str, items: Sequence[M], problems: Problems) -> tuple[M, ...]:
    """``items`` as :func:`checked_dicts` keeps them, as models (the same objects when all are valid and unique)."""
    dumped = [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]
    field = _IDENTITY[method]
    if _problem(method, dumped) is None and len({item.get(field) for item in dumped}) == len(dumped):
        return tuple(items)
    model: Callable[[dict[str, Any]], Any] = LIST_METHODS[method][1].model_validate
    return tuple(model(item) for item in checked_dicts(method, dumped, problems))


async def lenient_page(
    client: Client, method: str, cursor: str | None, problems: Problems
) -> tuple[list[Any], str | None]:
    """One page of ``method``'s list from ``client``'s server, fetched raw: the items :func:`checked_dicts` keeps,
    as models, and the next cursor.

    Raises:
        BackendError: the answer is not a list result at all.
    """
    key, model, request_type = LIST_METHODS[method]
    session = client.session
    data = request_type(params=types.PaginatedRequestParams(cursor=cursor)).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    opts: Any = {}
    session._stamp(data, opts)  # pyright: ignore[reportPrivateUsage]
    raw = await session._dispatcher.send_raw_request(method, data.get("params"), opts)  # pyright: ignore[reportPrivateUsage]
    items: Any = raw.get(key, [])
    next_cursor = raw.get("nextCursor")
    if not isinstance(items, list) or not (next_cursor is None or isinstance(next_cursor, str)):
        raise BackendError(problems.server, f"answered {method} with a result that is not a list")
    kept = [model.model_validate(item) for item in checked_dicts(method, items, problems)]
    if method == "tools/list":
        result = types.ListToolsResult(tools=kept, next_cursor=next_cursor)
        session._absorb_tool_listing(result, complete=cursor is None and next_cursor is None)  # pyright: ignore[reportPrivateUsage]
        kept = list(result.tools)
    return kept, next_cursor
