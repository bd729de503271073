"""Settings of hierarchical memory (section ``memory``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field

from hanzo_hub.config._base import _Model

__all__ = ["MemorySettings", "MemoryTierSettings"]


class MemoryTierSettings(_Model):
    """Retrieval limits of one tier."""

    k: int = Field(ge=0, description="Top-k fetched from this tier.")
    threshold: float = Field(ge=-1.0, le=1.0, description="Minimum cosine similarity for a dense hit.")
    weight: float = Field(default=0.0, description="Score bonus of this tier in the re-ranking.")


class MemorySettings(_Model):
    """Hierarchical memory: storage, retrieval, summarization and consolidation thresholds."""

    enabled: bool = Field(
        default=True,
        description="Serve the memory tools (remember, recall...) as server 'memory'; the store and model load lazily.",
    )
    path: Path | None = Field(default=None, description="Store folder; default: <home>/memory.")
    store: Literal["chroma", "memory"] = Field(default="chroma", description="'memory' keeps nothing on disk.")
    chroma_host: str | None = Field(default=None, description="Chroma server mode: host (default: embedded).")
    chroma_port: int = Field(default=8000, gt=0)
    embedder: Literal["sentence-transformers", "fake"] = "sentence-transformers"
    session: MemoryTierSettings = Field(default_factory=lambda: MemoryTierSettings(k=20, threshold=0.3, weight=0.03))
    project: MemoryTierSettings = Field(default_factory=lambda: MemoryTierSettings(k=10, threshold=0.5, weight=0.02))
    global_: MemoryTierSettings = Field(
        default_factory=lambda: MemoryTierSettings(k=5, threshold=0.6, weight=0.0), alias="global"
    )
    query_adapter: str = Field(
        default="bundled",
        description="Map recall queries before the dense search: 'bundled' (trained on LongMemEval questions the "
        "memory benchmark never scores; used only when the embedder is the model it was trained for), 'none', or "
        "the path of an .npz written by bench/train_memory_adapter.py. Stored memories are never re-embedded.",
    )
    reranker: Path | None = Field(
        default=None,
        description="Folder of a local sentence-transformers CrossEncoder (one output, e.g. a copy of "
        "cross-encoder/ms-marco-MiniLM-L6-v2) that re-orders the best rerank_top hits; never downloaded. Unset: no "
        "re-ranking.",
    )
    rerank_top: int = Field(default=30, ge=1, description="Hits of the fused ranking the cross-encoder scores.")
    rerank_weight: float = Field(
        default=1.0, ge=0, description="Weight of the cross-encoder's score (0-1) added to the fused score."
    )
    semantic_weight: float = 0.6
    lexical_weight: float = 0.15
    group_weight: float = Field(
        default=0.0,
        ge=0,
        description="Weight of the BM25 score of the conversation (source) an entry came from; 0 (the default): off.",
    )
    lexical_k1: float = Field(default=1.2, gt=0, description="BM25 k1 of the memory index.")
    lexical_b: float = Field(default=0.75, ge=0, le=1, description="BM25 b (length normalisation).")
    relevance_weight: float = 0.1
    recency_weight: float = 0.05
    recency_half_life_days: float = Field(default=30.0, gt=0)
    time_weight: float = Field(
        default=0.1,
        ge=0,
        description="Bonus for memories made in the time a query names ('ten days ago', 'last Saturday'); 0: off.",
    )
    feedback_weight: float = Field(
        default=0.4,
        ge=0,
        description="Pseudo-relevance feedback: how far the query vector moves towards the mean of the best "
        "feedback_top hits before every candidate's cosine is scored again; 0: off.",
    )
    feedback_top: int = Field(default=4, ge=1, description="Best hits whose vectors the feedback moves towards.")
    lexical: bool = Field(default=True, description="Fuse BM25 with the dense scores.")
    lexical_max_entries: int = Field(default=200_000, ge=0, description="Tiers larger than this use dense only.")
    token_budget: int = Field(default=2000, ge=1, description="Recall results are cut to this many tokens.")
    session_token_budget: int = Field(default=8000, ge=1)
    summarize_at: float = Field(default=0.75, gt=0, le=1, description="Share of the session budget that triggers.")
    summarize_share: float = Field(default=1 / 3, gt=0, le=1, description="Oldest share of the session summarized.")
    duplicate_cosine: float = Field(default=0.95, gt=0, le=1)
    promote_accesses: int = Field(default=3, ge=0, description="Session memories accessed more often are promoted.")
    cluster_cosine: float = Field(default=0.8, gt=0, le=1)
    cluster_min_size: int = Field(default=3, ge=2)
    decay_after_days: float = Field(default=90.0, gt=0)
    decay_factor: float = Field(default=0.9, gt=0, le=1)
    delete_after_days: float = Field(default=365.0, gt=0)
    consolidate_every: float = Field(default=3600.0, gt=0, description="Seconds between background runs.")
    session_idle_timeout: float = Field(
        default=86400.0,
        ge=0,
        description="A session a stateless-era client named (it has no connection to end with) ends once its "
        "memories go unused this long (no memory call names it), checked by the background runs; 0: never.",
    )
    wal_checkpoint_bytes: int = Field(default=4 * 1024**2, gt=0)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
