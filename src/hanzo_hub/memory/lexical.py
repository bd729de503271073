"""An incremental BM25 index for memories: the scoring of ``selection.lexical`` over postings that change.

``selection.lexical.BM25Index`` is immutable (tool catalogs are rebuilt); memories arrive one at a time, so this
keeps term frequencies per document and computes the BM25 weights at query time with the same tokenizer, the
same k1/b and the same Lucene idf.
"""

from __future__ import annotations

import math
from collections import Counter

from hanzo_hub.selection.lexical import BM25_B, BM25_K1
from hanzo_hub.selection.text import tokenize


class IncrementalBM25:
    """BM25 over documents keyed by id; add, replace and remove in O(terms of the document)."""

    def __init__(self, *, k1: float = BM25_K1, b: float = BM25_B) -> None:
        self._k1 = k1
        self._b = b
        self._postings: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._terms: dict[str, tuple[str, ...]] = {}
        self._total = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id`` (replacing what was there)."""
        self.remove(doc_id)
        counts = Counter(tokenize(text))
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[doc_id] = tf
        length = sum(counts.values())
        self._terms[doc_id] = tuple(counts)
        self._lengths[doc_id] = length
        self._total += length

    def remove(self, doc_id: str) -> None:
        """Drop ``doc_id``; unknown ids are ignored."""
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return
        self._total -= length
        for term in self._terms.pop(doc_id, ()):
            del self._postings[term][doc_id]
            if not self._postings[term]:
                del self._postings[term]

    def scores(self, query: str) -> dict[str, float]:
        """``{doc_id: score}`` for documents sharing a term with ``query``."""
        n = len(self._lengths)
        if n == 0:
            return {}
        avg = self._total / n or 1.0
        acc: dict[str, float] = {}
        for term, qtf in Counter(tokenize(query)).items():
            plist = self._postings.get(term)
            if not plist:
                continue
            idf = math.log(1 + (n - len(plist) + 0.5) / (len(plist) + 0.5)) * (1.0 + 0.2 * (qtf - 1))
            for doc_id, tf in plist.items():
                norm = self._k1 * (1 - self._b + self._b * self._lengths[doc_id] / avg)
                acc[doc_id] = acc.get(doc_id, 0.0) + idf * tf * (self._k1 + 1) / (tf + norm)
        return acc

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(doc_id, score)`` pairs, best first."""
        return sorted(self.scores(query).items(), key=lambda pair: -pair[1])[:k]
