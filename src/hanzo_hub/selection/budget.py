"""Token budgets for tool definitions: counting (the BPE counter of :mod:`hanzo_hub.llm.tokens`) and fitting."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hanzo_hub.llm.tokens import BpeCounter, HeuristicCounter, TokenCounter, default_counter
from hanzo_hub.selection.text import definition

__all__ = [
    "DEFAULT_TOKEN_BUDGET",
    "MAX_TOOLS",
    "BpeCounter",
    "BudgetResult",
    "HeuristicCounter",
    "TokenCounter",
    "default_counter",
    "definition_tokens",
    "fit_budget",
]

DEFAULT_TOKEN_BUDGET = 4000
MAX_TOOLS = 15


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
