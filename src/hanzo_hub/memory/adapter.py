"""The memory query adapter: recall queries are mapped by a learned linear map before the dense search.

Questions about the past ("what did I say about my sister's job?") and the statements that answer them ("my
sister just started as a nurse") sit further apart in a general sentence embedding than paraphrases do. The
bundled map (``query_adapter.npz``, trained by ``bench/train_memory_adapter.py`` on LongMemEval questions that the
memory benchmark never scores) moves a question towards the statements that answer it. Memory vectors are never
mapped, so changing or turning off the adapter (``memory.query_adapter``) re-embeds nothing. Mapped cosines keep
the scale of plain ones (on the benchmark's 188 questions the median cosine of an evidence turn stays 0.388 -> 0.387
and that of a top-10 hit goes from 0.323 to 0.299), so the tier thresholds keep their meaning.
"""

from __future__ import annotations

from pathlib import Path

from hanzo_hub.selection.adapter import QueryAdapter, adapter_for
from hanzo_hub.vectors import Embedder

__all__ = ["bundled_path", "memory_adapter"]


def bundled_path() -> Path:
    return Path(__file__).with_name("query_adapter.npz")


def memory_adapter(setting: str, embedder: Embedder) -> QueryAdapter | None:
    """The adapter ``memory.query_adapter`` names, for ``embedder`` (blocking; None where the bundled map is for
    another model).

    Raises:
        ConfigError: a configured file cannot be read or does not fit the embedder's dimension.
    """
    return adapter_for(setting, embedder, bundled=bundled_path(), what="memory recall")
