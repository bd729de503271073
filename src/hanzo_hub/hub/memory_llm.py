"""The memory server's LLM hooks, answered by the hub's router: session summaries with their facts, and one general
statement for a cluster of related project memories.

Each request is routed cost-first (bookkeeping, not a user's question) and billed to the user and project whose
memories it reads. Without a provider, or when the model's answer cannot be used, a hook answers ``None`` and the
memory layer keeps its deterministic behaviour (extractive summary; the cluster left alone).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from hanzo_hub.errors import HubError
from hanzo_hub.hub.llm_runtime import LlmRuntime
from hanzo_hub.llm.types import Caller, ChatMessage, ChatRequest
from hanzo_hub.memory.models import MemoryScope

logger = logging.getLogger(__name__)

MAX_FACTS = 20
MAX_CHARS = 500
"""Longest fact or statement kept from a model's answer."""

SUMMARIZE = (
    "You maintain a user's long-term memory. Below are notes from the oldest part of a conversation. Answer with "
    'one JSON object and nothing else: {"summary": "<two or three sentences>", "facts": ["<one durable fact per '
    'item: names, numbers, preferences, decisions>"]}. Keep facts self-contained; leave out small talk.'
)
GENERALIZE = (
    "You maintain a user's long-term memory. The memories below are related. Answer with one sentence that states "
    "what they have in common as a general, lasting fact about the user, and nothing else."
)


class RoutedSummarizer:
    """``memory.summarize.Summarizer`` through ``llm``."""

    def __init__(self, llm: LlmRuntime) -> None:
        self._llm = llm

    async def __call__(self, texts: Sequence[str], scope: MemoryScope) -> tuple[str, list[str]] | None:
        answer = await _ask(self._llm, SUMMARIZE, texts, scope, max_tokens=600)
        if answer is None:
            return None
        parsed = _json_object(answer)
        summary = parsed.get("summary") if parsed is not None else None
        facts = parsed.get("facts") if parsed is not None else None
        if not isinstance(summary, str) or not isinstance(facts, list):
            logger.warning("memory summary: the model's answer was not the JSON asked for; using the extractive one")
            return None
        kept = [f.strip()[:MAX_CHARS] for f in facts if isinstance(f, str) and f.strip()][:MAX_FACTS]
        return summary.strip()[: MAX_CHARS * 2], kept


class RoutedGeneralizer:
    """``memory.consolidate.Generalizer`` through ``llm``."""

    def __init__(self, llm: LlmRuntime) -> None:
        self._llm = llm

    @property
    def available(self) -> bool:
        """Whether the router has a provider now."""
        return self._llm.available

    async def __call__(self, texts: Sequence[str], scope: MemoryScope) -> str | None:
        answer = await _ask(self._llm, GENERALIZE, texts, scope, max_tokens=120)
        text = (answer or "").strip().strip('"')
        return text[:MAX_CHARS] or None


async def _ask(
    llm: LlmRuntime, instruction: str, texts: Sequence[str], scope: MemoryScope, max_tokens: int
) -> str | None:
    if not llm.available:
        return None
    notes = "\n".join(f"- {text}" for text in texts)
    request = ChatRequest(
        messages=(ChatMessage(role="system", content=instruction), ChatMessage(role="user", content=notes)),
        max_tokens=max_tokens,
        temperature=0,
        policy="cost_first",
    )
    try:
        result = await llm.chat(request, Caller(user=scope.user, project=scope.project))
    except HubError as exc:  # no eligible model, a budget, every provider failing: memory keeps its own way
        logger.warning("memory: the router could not answer (%s); using the fallback", exc)
        return None
    return result.message.text()


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's answer, tolerating a code fence or words around it."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
