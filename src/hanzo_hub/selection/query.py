"""Query expansion without an LLM: split a multi-step request into sub-queries.

Multi-tool tasks ("create a document, then convert it to PDF") name several needs; one embedding of the whole text
averages them and the minor needs drop out of the top k. Each clause is searched as well and the rankings fused.
"""

from __future__ import annotations

import re

from hanzo_hub.selection.text import tokenize

MAX_SUBQUERIES = 8
MIN_SUBQUERY_TOKENS = 2

_SENTENCE = re.compile(r"(?<=[.!?;:\u3002\uff01\uff1f\uff1b])\s+|\n+")
_CLAUSE = re.compile(
    r",\s*(?:and\s+)?(?:then\s+)?|\s+(?:and then|then|after that|afterwards|finally|also|as well as|and|plus)\s+",
    re.IGNORECASE,
)


def subqueries(query: str) -> list[str]:
    """Return the clauses of ``query`` worth searching on their own (empty when it has only one)."""
    pieces: list[str] = []
    for sentence in _SENTENCE.split(query.strip()):
        pieces.extend(part.strip(" .,;") for part in _CLAUSE.split(sentence))
    out: list[str] = []
    seen: set[str] = set()
    for piece in pieces:
        key = " ".join(tokenize(piece))
        if len(key.split()) >= MIN_SUBQUERY_TOKENS and key not in seen:
            seen.add(key)
            out.append(piece)
    return out[:MAX_SUBQUERIES] if len(out) > 1 else []
