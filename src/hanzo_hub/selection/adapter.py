"""A query-side adapter for tool search: a learned linear map applied to query vectors before dense search.

Tool vectors stay as the embedder makes them, so an index needs no re-embedding when the adapter changes. The
bundled adapter (``query_adapter.npz``, trained by ``bench/train_query_adapter.py`` on MetaTool's queries) belongs
to one embedding model: it carries that model's vectors of a few probe texts, and :func:`load_adapter` applies it
only when the configured embedder reproduces them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hanzo_hub.errors import ConfigError
from hanzo_hub.selection.dense import Matrix
from hanzo_hub.vectors.base import Embedder

__all__ = ["PROBE_MIN_COSINE", "PROBE_TEXTS", "QueryAdapter", "adapter_for", "bundled_path", "load_adapter"]

log = logging.getLogger(__name__)

PROBE_TEXTS = (
    "search the web for recent news",
    "read a file from the project",
    "run a SQL query against the database",
    "send a message to the team channel",
)
PROBE_MIN_COSINE = 0.99
"""The configured embedder's probe vectors must reach this cosine with the stored ones (int8 queries reach ~0.99
of fp32, a different model far less)."""


def bundled_path() -> Path:
    return Path(__file__).with_name("query_adapter.npz")


@dataclass(frozen=True)
class QueryAdapter:
    """``matrix`` (d x d) maps a query row ``q`` to ``normalize(q @ matrix)``; ``probes`` are the training model's
    vectors of :data:`PROBE_TEXTS` (empty: unchecked)."""

    matrix: Matrix
    probes: Matrix
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[0])

    def __call__(self, vectors: Matrix) -> Matrix:
        mapped: Matrix = np.asarray(vectors, dtype=np.float32) @ self.matrix
        mapped /= np.maximum(np.linalg.norm(mapped, axis=1, keepdims=True), 1e-12)
        return mapped

    def matches(self, probe_vectors: Matrix) -> bool:
        """Whether ``probe_vectors`` (an embedder's vectors of :data:`PROBE_TEXTS`) come from the training model."""
        if self.probes.shape != np.shape(probe_vectors):
            return False
        a = self.probes / np.linalg.norm(self.probes, axis=1, keepdims=True)
        b = np.asarray(probe_vectors, dtype=np.float32)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        return bool(np.min(np.sum(a * b, axis=1)) >= PROBE_MIN_COSINE)

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as f:
            # float16 halves the file; the map's rounding moves query vectors by ~1e-4 (cosine), below the int8 query
            # encoder's own error
            matrix = self.matrix.astype(np.float16)
            np.savez_compressed(f, matrix=matrix, probes=self.probes, info=np.array(json.dumps(dict(self.info))))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> QueryAdapter:
        """Raises:
        ConfigError: the file is missing, unreadable or not a square adapter matrix."""
        try:
            with np.load(path, allow_pickle=False) as data:
                matrix = np.asarray(data["matrix"], dtype=np.float32)
                probes = np.asarray(data["probes"], dtype=np.float32)
                info = json.loads(str(data["info"]))
        except (OSError, KeyError, ValueError) as exc:
            raise ConfigError(f"query adapter {path}: cannot read it ({exc})") from exc
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not np.isfinite(matrix).all():
            raise ConfigError(f"query adapter {path}: expected a finite square matrix, got shape {matrix.shape}")
        if probes.size and probes.shape[1:] != (matrix.shape[0],):
            raise ConfigError(f"query adapter {path}: probe vectors of shape {probes.shape} do not fit the matrix")
        return cls(matrix, probes, info)


def load_adapter(
    setting: str | Path,
    dimension: int,
    probe_vectors: Matrix | None,
    *,
    bundled: Path | None = None,
    what: str = "tool search",
) -> QueryAdapter | None:
    """The adapter for a ``query_adapter`` setting: ``"none"`` gives None; ``"bundled"`` the shipped one (``bundled``,
    default tool search's) when the embedder matches its model (else None, logged); a path, that file, checked for
    its dimension only. ``what`` names the user in log lines.

    Raises:
        ConfigError: a configured file cannot be read or does not fit the embedder's dimension.
    """
    if setting == "none":
        return None
    if setting == "bundled":
        adapter = QueryAdapter.load(bundled or bundled_path())
        if adapter.dimension != dimension or probe_vectors is None or not adapter.matches(probe_vectors):
            log.info("%s: the bundled query adapter is for another embedding model; queries go unmapped", what)
            return None
        return adapter
    adapter = QueryAdapter.load(Path(setting))
    if adapter.dimension != dimension:
        raise ConfigError(
            f"query adapter {setting}: made for {adapter.dimension}-dimensional vectors, the embedder gives {dimension}"
        )
    return adapter


def adapter_for(
    setting: str | Path, embedder: Embedder, *, bundled: Path | None = None, what: str = "tool search"
) -> QueryAdapter | None:
    """:func:`load_adapter` for ``embedder`` (blocking: ``"bundled"`` embeds :data:`PROBE_TEXTS` to check that
    ``embedder`` is the model the map was trained for); logs the adapter in use.

    Raises:
        ConfigError: a configured file cannot be read or does not fit the embedder's dimension.
    """
    probes = None
    if setting == "bundled":
        probes = np.asarray(embedder.embed_sync(list(PROBE_TEXTS)), dtype=np.float32)
    adapter = load_adapter(setting, embedder.dimension, probes, bundled=bundled, what=what)
    if adapter is not None:
        log.info("%s: query adapter %s (%s)", what, setting, dict(adapter.info).get("data", "?"))
    return adapter
