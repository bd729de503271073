"""Exposure mode ``auto`` (the default): every tool while their definitions are small, tool search once they are not.

Hundreds of tool definitions cost a model tens of thousands of tokens on every request and make it pick worse
tools; a handful behind ``find_tools`` costs a round trip for nothing. In ``auto`` a client's ``tools/list`` holds
every tool it may see while their definitions (name, description and input schema, as a model is sent them, counted
with tool search's BPE tokenizer) take at most ``exposure.auto_search_tokens`` tokens, and search mode's list
(``find_tools``, ``call_tool``, the core tools and the tools found for that client) above that. The default,
20,000 tokens, is about a tenth of a 200K-token context: the rule Claude Code applies before it defers MCP tools to
its own tool search. The choice follows the tool set: a server added, removed or changing its tools may switch
it, and clients hear ``list_changed`` as for any change of the tools. ``find_tools`` and ``call_tool`` answer in
``auto`` whichever way the list goes, unless a listed downstream tool has that name.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

import anyio
import anyio.to_thread
import mcp_types as types

from hanzo_hub.selection.budget import TokenCounter, default_counter, definition_tokens

__all__ = ["AutoListing", "ByteCounter", "Listing", "ToolTokens", "listing_for"]

logger = logging.getLogger(__name__)

Listing = Literal["all", "search"]


class ToolTokens:
    """The tokens of tool definitions, counted once per tool (again when its definition changes), in a worker thread:
    the tokenizer takes most of a second to load and about 0.1 ms a tool to count."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter
        self._counted: dict[str, tuple[types.Tool, int]] = {}
        self._lock = anyio.Lock()

    def _known(self, tool: types.Tool) -> bool:
        seen = self._counted.get(tool.name)
        return seen is not None and (seen[0] is tool or seen[0] == tool)

    def _count(self, tools: Sequence[types.Tool]) -> list[tuple[types.Tool, int]]:
        if self._counter is None:
            self._counter = default_counter()
        counter = self._counter
        return [
            (tool, definition_tokens(tool.model_dump(mode="json", by_alias=True, exclude_none=True), counter))
            for tool in tools
        ]

    async def total(self, tools: Sequence[types.Tool]) -> int:
        """The tokens all of ``tools``' definitions take (names are unique: they are the exposed ones)."""
        missing = [tool for tool in tools if not self._known(tool)]
        if missing:
            async with self._lock:
                counted = await anyio.to_thread.run_sync(self._count, missing)
            for tool, tokens in counted:
                self._counted[tool.name] = (tool, tokens)
            if len(self._counted) > 2 * len(tools) + 256:  # tools long gone: keep what is listed now
                listed = {tool.name for tool in tools}
                self._counted = {name: seen for name, seen in self._counted.items() if name in listed}
        counted_now = self._counted
        return sum(counted_now[tool.name][1] for tool in tools if tool.name in counted_now)


class ByteCounter:
    """A text's UTF-8 bytes: no token is shorter than a byte, so they bound its tokens from above."""

    name = "bytes"

    def count(self, text: str) -> int:
        return len(text.encode("utf-8"))


class AutoListing:
    """Which list ``auto`` gives for a set of tools, logging each switch. Tools whose definitions take no more
    bytes than the threshold has tokens are listed without loading the tokenizer."""

    def __init__(self, threshold: int, counter: TokenCounter | None = None) -> None:
        self.threshold = threshold
        self.tokens = ToolTokens(counter)
        self._bytes = ToolTokens(ByteCounter())
        self._last: Listing | None = None

    async def __call__(self, tools: Sequence[types.Tool]) -> Listing:
        tokens = await self._bytes.total(tools)
        if tokens > self.threshold:
            tokens = await self.tokens.total(tools)
        listing: Listing = "search" if tokens > self.threshold else "all"
        if listing != self._last:
            self._last = listing
            logger.info(
                "exposure auto: %d tools take at most %d tokens (threshold %d): %s",
                len(tools),
                tokens,
                self.threshold,
                "clients see find_tools and call_tool" if listing == "search" else "clients see every tool",
            )
        return listing


async def listing_for(mode: str, tools: Sequence[types.Tool], auto: AutoListing) -> Listing:
    """The list a client in exposure ``mode`` gets for ``tools`` (those of its profile)."""
    if mode == "auto":
        return await auto(tools)
    return "search" if mode == "search" else "all"
