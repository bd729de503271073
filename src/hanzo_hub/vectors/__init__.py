"""Embedding models and vector stores behind two small protocols.

Heavy adapters (sentence-transformers, chromadb) load lazily through the tables below; importing this package
imports neither.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from hanzo_hub.config.embedding import EmbeddingSettings
from hanzo_hub.vectors.base import Embedder, VectorRecord, VectorStore, embed_queries

EMBEDDERS: dict[str, str] = {
    "fake": "hanzo_hub.vectors.fake:HashEmbedder",
    "sentence-transformers": "hanzo_hub.vectors.st_embedder:SentenceTransformerEmbedder",
}

VECTOR_STORES: dict[str, str] = {
    "memory": "hanzo_hub.vectors.fake:MemoryVectorStore",
    "chroma": "hanzo_hub.vectors.chroma_store:ChromaVectorStore",
}


def load_impl(table: dict[str, str], kind: str) -> Any:
    """Import the implementation registered under ``kind`` in ``table`` (``module:attr`` strings).

    Raises:
        KeyError: ``kind`` is not in the table.
    """
    module_name, _, attr = table[kind].partition(":")
    return getattr(importlib.import_module(module_name), attr)


def build_embedder(
    kind: str,
    embedding: EmbeddingSettings | None = None,
    *,
    home: Path | None = None,
    model_path: Path | None = None,
) -> Embedder:
    """The embedder registered under ``kind``, running as ``embedding`` says with its ONNX cache under ``home``.

    The one place memory, tool search and the router build their embedder from settings. Without ``embedding``
    or a cache folder the sentence-transformers embedder runs on torch only.

    Raises:
        KeyError: ``kind`` is not in ``EMBEDDERS``.
    """
    cls = load_impl(EMBEDDERS, kind)
    if kind == "fake":
        return cls()  # type: ignore[no-any-return]
    options: dict[str, Any] = {} if model_path is None else {"model_path": model_path}
    if embedding is not None:
        options.update(
            runtime=embedding.runtime,
            cache_dir=embedding.cache_dir(home),
            onnx_threads=embedding.onnx_threads,
            query_precision=embedding.query_precision,
        )
    return cls(**options)  # type: ignore[no-any-return]


__all__ = (
    "EMBEDDERS",
    "VECTOR_STORES",
    "Embedder",
    "VectorRecord",
    "VectorStore",
    "build_embedder",
    "embed_queries",
    "load_impl",
)
