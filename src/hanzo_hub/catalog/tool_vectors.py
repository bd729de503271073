"""Precomputed embeddings of the built-in catalog's tools, shipped so a fresh home skips embedding them.

``tool_vectors.npz`` holds ``model_id`` (the embedder's id), ``hashes`` (the index's content hash of each tool's
embedded text, which already folds in the model id) and ``vectors`` (float16, unit length). The tool index takes a
vector from here only for a hash it finds under the same model id; anything else is embedded as usual.
Regenerate with ``scripts/build-tool-vectors`` whenever a manifest's tools change.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

TOOL_VECTORS = Path(__file__).with_name("tool_vectors.npz")

Vectors = dict[str, npt.NDArray[np.float32]]


@functools.lru_cache(maxsize=4)
def _load(path: Path) -> tuple[str, Vectors]:
    try:
        with np.load(path, allow_pickle=False) as data:
            model_id = str(data["model_id"])
            hashes = [str(h) for h in data["hashes"]]
            vectors = np.asarray(data["vectors"], dtype=np.float32)
    except (OSError, KeyError, ValueError) as exc:
        logger.warning("no shipped tool vectors at %s (%s)", path, exc)
        return "", {}
    if vectors.ndim != 2 or len(hashes) != vectors.shape[0]:
        logger.warning("shipped tool vectors at %s are malformed; ignored", path)
        return "", {}
    return model_id, dict(zip(hashes, vectors, strict=True))


def load_tool_vectors(model_id: str, path: Path = TOOL_VECTORS) -> Vectors:
    """``{content hash: vector}`` of the shipped tools for ``model_id``; empty for another model or no file."""
    shipped_model, vectors = _load(path)
    return vectors if shipped_model == model_id else {}


def shipped_model_id(path: Path = TOOL_VECTORS) -> str:
    """The embedder id the shipped vectors come from ('' without a file)."""
    return _load(path)[0]


def write_tool_vectors(
    model_id: str, hashes: Sequence[str], vectors: Sequence[Sequence[float]], path: Path = TOOL_VECTORS
) -> None:
    """Write the file (float16, sorted by hash so regenerating is deterministic)."""
    order = sorted(range(len(hashes)), key=lambda i: hashes[i])
    array = np.asarray(vectors, dtype=np.float32)[order].astype(np.float16)
    np.savez_compressed(
        path, model_id=np.asarray(model_id), hashes=np.asarray([hashes[i] for i in order]), vectors=array
    )
    _load.cache_clear()
