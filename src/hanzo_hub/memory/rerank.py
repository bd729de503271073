"""Optional cross-encoder re-ranking of recall results, with a local model (``memory.reranker``).

A cross-encoder reads the query and a memory together and scores how well the memory answers it, which a
bi-encoder's cosine cannot; it is also far slower, so only the best ``memory.rerank_top`` hits of the fused
ranking are scored. The model is any sentence-transformers ``CrossEncoder`` folder with one output (for example a
copy of ``cross-encoder/ms-marco-MiniLM-L6-v2``); it is loaded from disk only (``local_files_only``), on first use,
in a worker thread, and never downloaded. Nothing is bundled: without the setting recall does not re-rank.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hanzo_hub.errors import ConfigError, EmbeddingError

__all__ = ["CrossEncoderReranker"]


class CrossEncoderReranker:
    """Scores (query, text) pairs in [0, 1] with a local cross-encoder; blocking, thread-safe, loads lazily."""

    def __init__(self, path: Path, *, max_length: int = 512, batch_size: int = 32) -> None:
        self.path = path
        self.max_length = max_length
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                if not self.path.is_dir():
                    raise ConfigError(f"memory.reranker {self.path}: no such model folder")
                try:
                    from sentence_transformers import CrossEncoder

                    model = CrossEncoder(
                        str(self.path), device="cpu", local_files_only=True, max_length=self.max_length
                    )
                except Exception as exc:
                    raise ConfigError(f"memory.reranker {self.path}: cannot load a cross-encoder ({exc})") from exc
                labels = int(getattr(model.config, "num_labels", 1))
                if labels != 1:
                    raise ConfigError(
                        f"memory.reranker {self.path}: the model gives {labels} scores per pair, a re-ranker gives one"
                    )
                self._model = model
            return self._model

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """The relevance of each of ``texts`` to ``query``, in [0, 1] (sigmoid of the model's logit).

        Raises:
            ConfigError: the model folder is missing or is not a one-output cross-encoder.
            EmbeddingError: the model failed on these inputs.
        """
        if not texts:
            return []
        model = self._load()
        import torch

        try:
            out = model.predict(
                [(query, t) for t in texts],
                batch_size=self.batch_size,
                activation_fn=torch.nn.Sigmoid(),
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        except Exception as exc:
            raise EmbeddingError(f"memory re-ranker failed: {exc}") from exc
        return [float(x) for x in out.reshape(-1)]
