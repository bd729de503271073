"""Search exposure: instead of hundreds of tools, clients see ``find_tools``, ``call_tool`` and a few core tools.

``find_tools(query)`` ranks every exposed tool with the selection pipeline (BM25 fused with dense embeddings; the
model loads on the first search, off the event loop) and returns the chosen tools' full definitions within the
token budget. The chosen tools are then promoted into that client's ``tools/list`` (with ``list_changed``), and
``call_tool(name, arguments)`` invokes any tool by its exposed name. The index is rebuilt when the tool list changes.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types

from hanzo_hub.config import ExposureSettings
from hanzo_hub.selection.pipeline import Selection, ToolSelector
from hanzo_hub.vectors import EMBEDDERS, load_impl
from hanzo_hub.vectors.base import Embedder

logger = logging.getLogger(__name__)

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
PROMOTED_KEY = "hanzo_hub.promoted_tools"

META_TOOLS = (
    types.Tool(
        name=FIND_TOOLS,
        description=(
            "Find the tools that can do a task. Describe the task in plain words; returns the best-matching tools "
            "with their full definitions (name, description, input schema), best first. Then call one with "
            "call_tool, or directly by its name."
        ),
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What you want to do, in plain words."}},
            "required": ["query"],
        },
    ),
    types.Tool(
        name=CALL_TOOL,
        description="Call any tool by its exact name (as returned by find_tools) with its arguments.",
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's exact name."},
                "arguments": {"type": "object", "description": "The tool's arguments, matching its input schema."},
            },
            "required": ["name"],
        },
    ),
)


class ToolSearch:
    """Ranks the hub's exposed tools for a query; rebuilds its index when the tools change."""

    def __init__(self, settings: ExposureSettings) -> None:
        self._settings = settings
        self._embedder: Embedder | None = None
        self._indexed: tuple[types.Tool, ...] | None = None
        self._selector: ToolSelector | None = None
        self._lock = anyio.Lock()
        self.shared_promoted: dict[str, None] = {}

    def _embedder_for_search(self) -> Embedder | None:
        if self._settings.embedder == "none":
            return None
        if self._embedder is None:
            self._embedder = load_impl(EMBEDDERS, self._settings.embedder)()
        return self._embedder

    async def _index(self, tools: tuple[types.Tool, ...]) -> ToolSelector:
        async with self._lock:
            if self._selector is None or self._indexed is not tools:
                rows = [
                    {
                        "name": tool.name,
                        "description": tool.description or "",
                        "inputSchema": tool.input_schema,
                        "server": tool.name.split("__", 1)[0] if "__" in tool.name else "",
                        "tool_id": tool.name,
                    }
                    for tool in tools
                ]
                self._selector = await ToolSelector.build(
                    rows,
                    embedder=self._embedder_for_search(),
                    core_tools=self._settings.core_tools,
                    max_tools=self._settings.max_tools,
                    token_budget=self._settings.token_budget,
                )
                self._indexed = tools
            return self._selector

    async def find(self, query: str, tools: tuple[types.Tool, ...]) -> tuple[Selection, list[types.Tool]]:
        """The selection for ``query`` and the chosen tools' definitions, best first."""
        selector = await self._index(tools)
        selection = await selector.select(query)
        by_name = {tool.name: tool for tool in tools}
        return selection, [by_name[c.id] for c in selection.tools if c.id in by_name]

    def listed(self, tools: tuple[types.Tool, ...], promoted: set[str] | dict[str, None]) -> list[types.Tool]:
        """What ``tools/list`` shows in search mode: the meta tools, core tools, then this client's promoted tools."""
        keep = set(self._settings.core_tools) | set(promoted)
        return [*META_TOOLS, *(tool for tool in tools if tool.name in keep)]


SHARED_PROMOTED_MAX = 64
"""Stateless-era clients have no connection to remember promotions on; they share the latest ones, up to this many."""


def promoted_of(connection: Any, stateless: bool, shared: dict[str, None]) -> set[str] | dict[str, None]:
    """The tools promoted for a client: its connection's own set, or the hub-wide recent set for stateless clients."""
    if stateless:
        return shared
    state: dict[str, Any] = connection.state
    promoted: set[str] = state.setdefault(PROMOTED_KEY, set())
    return promoted


def promote(promoted: set[str] | dict[str, None], names: set[str]) -> bool:
    """Add ``names``; returns whether anything was new. The shared set keeps only the most recent entries."""
    new = names - set(promoted)
    if isinstance(promoted, set):
        promoted |= new
        return bool(new)
    for name in names:
        promoted.pop(name, None)
        promoted[name] = None
    while len(promoted) > SHARED_PROMOTED_MAX:
        del promoted[next(iter(promoted))]
    return bool(new)


def selection_result(selection: Selection, chosen: list[types.Tool]) -> types.CallToolResult:
    """``find_tools``' answer: the definitions as structured content, a readable summary as text."""
    definitions = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in chosen]
    scores = {c.id: round(c.score, 4) for c in selection.tools}
    lines = [f"{tool.name}: {(tool.description or '').strip().splitlines()[0][:160]}" for tool in chosen if tool]
    text = "\n".join(lines) if lines else "No matching tools."
    structured = {
        "tools": definitions,
        "scores": [scores.get(tool.name) for tool in chosen],
        "tokens": selection.tokens,
        "all_tools_tokens": selection.all_tokens,
        "llm_filter": selection.stage2,
        "note": selection.stage2_note,
    }
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)
