"""Session summarization: past 75% of its token budget, the oldest third of a session becomes project facts.

With an LLM hook (``Summarizer``, e.g. the routing layer's completer), the hook writes the summary and the facts.
Without one, a deterministic extractive fallback keeps the facts retrievable: every sentence that states something
(a number, a name, a first-person statement, a preference or a decision) becomes a project memory verbatim, and the
summary is the first sentence of each summarized memory. The summarized session memories are replaced by the
summary, so the session shrinks back under its budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from hanzo_hub.memory.models import MemoryEntry, MemoryScope
from hanzo_hub.memory.service import MemoryService

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_FACTUAL = re.compile(
    r"\d|\b(i|i'm|i've|my|we|our|is|are|was|were|prefer|likes?|loves?|hates?|uses?|decided|always|never|"
    r"must|should|need|wants?|named|called|lives?|works?)\b",
    re.IGNORECASE,
)
MIN_FACT_CHARS = 12
SUMMARY_SOURCE = "summary"


class Summarizer(Protocol):
    """An LLM hook: a summary and the facts worth keeping from ``scope``'s memories ``texts``; ``None`` when no LLM
    answered (none is available, or its answer was unusable): the deterministic fallback runs instead."""

    async def __call__(self, texts: Sequence[str], scope: MemoryScope) -> tuple[str, list[str]] | None: ...


def extract_facts(texts: Sequence[str]) -> tuple[str, list[str]]:
    """The deterministic fallback: a first-sentence summary and every fact-like sentence, deduplicated."""
    facts: list[str] = []
    seen: set[str] = set()
    firsts: list[str] = []
    for text in texts:
        sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
        if sentences:
            firsts.append(sentences[0])
        for sentence in sentences:
            norm = " ".join(sentence.lower().split())
            if len(sentence) >= MIN_FACT_CHARS and _FACTUAL.search(sentence) and norm not in seen:
                seen.add(norm)
                facts.append(sentence)
    return " / ".join(firsts), facts


@dataclass(frozen=True, slots=True)
class SummaryReport:
    """What one summarization did."""

    summarized: int
    facts: list[MemoryEntry]
    summary: MemoryEntry | None
    used_llm: bool


class SessionSummarizer:
    """Watches session token counts and summarizes when they pass the threshold."""

    def __init__(self, service: MemoryService, hook: Summarizer | None = None) -> None:
        self.service = service
        self.hook = hook

    async def session_tokens(self, scope: MemoryScope) -> int:
        """Tokens held in the caller's session tier."""
        index = await self.service.store.scope(scope.key("session"))
        return sum(e.tokens for e in index.entries.values())

    async def maybe_summarize(self, scope: MemoryScope, *, force: bool = False) -> SummaryReport | None:
        """Summarize the oldest share of the session if it passed its budget share (or ``force``)."""
        s = self.service.settings
        if not force and await self.session_tokens(scope) <= s.summarize_at * s.session_token_budget:
            return None
        index = await self.service.store.scope(scope.key("session"))
        ordered = sorted((e for e in index.entries.values() if e.source != SUMMARY_SOURCE), key=lambda e: e.created_at)
        oldest = ordered[: max(1, int(len(ordered) * s.summarize_share))] if ordered else []
        if not oldest:
            return None
        texts = [e.content for e in oldest]
        answered = await self.hook(texts, scope) if self.hook is not None else None
        summary_text, facts = answered if answered is not None else extract_facts(texts)
        stored = await self.service.remember(
            scope, facts, tier="project", source=f"{SUMMARY_SOURCE}:session:{scope.session}", tags=("fact",)
        )
        summary = None
        if summary_text:
            (summary,) = await self.service.remember(scope, [summary_text], tier="session", source=SUMMARY_SOURCE)
        await index.delete([e.id for e in oldest])
        return SummaryReport(len(oldest), stored, summary, answered is not None)
