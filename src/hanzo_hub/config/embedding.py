"""Settings of the embedding model runtime (section ``embedding``), shared by memory, tool search and the router."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from hanzo_hub.config._base import _Model

__all__ = ["EmbeddingRuntime", "EmbeddingSettings", "QueryPrecision"]

EmbeddingRuntime = Literal["auto", "torch", "onnx"]
QueryPrecision = Literal["int8", "fp32"]


class EmbeddingSettings(_Model):
    """How the sentence-transformers embedder runs its query (small-batch) embeddings."""

    runtime: EmbeddingRuntime = Field(
        default="auto",
        description="'onnx': queries through ONNX Runtime (the graph is exported once from the local model into "
        "the cache); 'torch': torch only; 'auto': onnx when onnxruntime imports. Any ONNX failure falls back to "
        "torch with a warning.",
    )
    onnx_threads: int | None = Field(
        default=None, ge=1, description="ONNX Runtime intra-op threads (default: half the CPUs, 1 to 4)."
    )
    query_precision: QueryPrecision = Field(
        default="int8",
        description="Search queries (tool search, memory recall) on ONNX Runtime: 'int8' runs them through a "
        "dynamically quantized copy of the exported graph (int8 weights per channel, written once into the cache), "
        "about twice as fast on CPU with recall unchanged within noise (bench/results/tool_selection.md, "
        "bench/results/memory.md); 'fp32' uses the full-precision graph. Stored vectors (tools, memories) and "
        "routing always use full precision.",
    )
    cache_path: Path | None = Field(default=None, description="Folder of exported ONNX models; default <home>/models.")

    def cache_dir(self, home: Path | None) -> Path | None:
        """The ONNX model cache for a hub whose home is ``home`` (None: no cache, so torch only)."""
        return self.cache_path or (home / "models" if home is not None else None)
