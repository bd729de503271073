"""Embedding models and vector stores behind two small protocols.

Heavy adapters (sentence-transformers, chromadb) load lazily through the tables below; importing this package
imports neither.
"""

from __future__ import annotations

import importlib
from typing import Any

from hanzo_hub.vectors.base import Embedder, VectorRecord, VectorStore

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


__all__ = ("EMBEDDERS", "VECTOR_STORES", "Embedder", "VectorRecord", "VectorStore", "load_impl")
