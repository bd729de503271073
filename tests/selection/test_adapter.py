"""The query adapter: applied to query vectors only, on both query paths; the bundled one only for its model."""

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hanzo_hub.config import EmbeddingSettings, ExposureSettings
from hanzo_hub.errors import ConfigError
from hanzo_hub.hub.search import ToolSearch
from hanzo_hub.selection import FusionParams, ToolSelector
from hanzo_hub.selection.adapter import PROBE_TEXTS, QueryAdapter, bundled_path, load_adapter
from hanzo_hub.vectors.fake import HashEmbedder
from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

DENSE_ONLY = FusionParams(lexical_weight=0, decompose=False, interleave=False)


def _swap(tools: list[dict[str, Any]], a: str, b: str, embedder: HashEmbedder) -> QueryAdapter:
    """An orthogonal map that sends tool ``a``'s text vector onto tool ``b``'s (a Householder reflection)."""
    from hanzo_hub.selection.text import tool_text

    texts = {f"{t['server']}::{t['name']}": tool_text(t) for t in tools}
    va, vb = (np.asarray(embedder.embed_sync([texts[x]])[0]) for x in (a, b))
    u = (va - vb) / np.linalg.norm(va - vb)
    return QueryAdapter((np.eye(len(u)) - 2 * np.outer(u, u)).astype(np.float32), np.zeros((0, len(u)), np.float32))


async def test_the_adapter_maps_queries_on_both_query_paths(tools: list[dict[str, Any]]) -> None:
    from hanzo_hub.selection.text import tool_text

    embedder = HashEmbedder()
    forecast = next(t for t in tools if t["name"] == "get_forecast")
    query = tool_text(forecast)  # the query is the tool's own text: dense rank 1 without a map
    plain = await ToolSelector.build(tools, embedder=embedder, params=DENSE_ONLY)
    assert (await plain.select(query)).candidates[0].id == "weather::get_forecast"

    adapter = _swap(tools, "weather::get_forecast", "fs::read_file", embedder)
    mapped = await ToolSelector.build(tools, embedder=embedder, params=DENSE_ONLY, query_adapter=adapter)
    selection = await mapped.select(query)
    assert selection.candidates[0].id == "fs::read_file"  # async path: vectors passed in
    assert selection.query_adapter
    assert not (await plain.select(query)).query_adapter
    assert mapped.stage1(query)[0].id == "fs::read_file"  # sync path: the retriever embeds
    # the tool vectors are untouched: the index holds what the embedder made
    assert mapped.retriever.dense is not None
    assert plain.retriever.dense is not None
    np.testing.assert_array_equal(mapped.retriever.dense.matrix, plain.retriever.dense.matrix)


def test_save_and_load_keep_the_map_and_its_model_check(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    matrix = (np.eye(8) + 0.1 * rng.standard_normal((8, 8))).astype(np.float32)
    probes = rng.standard_normal((len(PROBE_TEXTS), 8)).astype(np.float32)
    QueryAdapter(matrix, probes, {"data": "test"}).save(tmp_path / "a.npz")
    loaded = QueryAdapter.load(tmp_path / "a.npz")
    assert loaded.info == {"data": "test"}
    assert loaded.dimension == 8
    np.testing.assert_allclose(loaded.matrix, matrix, atol=1e-3)  # stored as float16
    rows = loaded(rng.standard_normal((3, 8)).astype(np.float32))
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)
    assert loaded.matches(probes * 3.0)  # scale does not matter, direction does
    assert not loaded.matches(rng.standard_normal(probes.shape).astype(np.float32))
    assert not loaded.matches(probes[:2])


def test_load_adapter_settings(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    QueryAdapter(np.eye(4, dtype=np.float32), np.zeros((0, 4), np.float32)).save(path)
    assert load_adapter("none", 4, None) is None
    assert load_adapter(str(path), 4, None) is not None
    with pytest.raises(ConfigError, match="4-dimensional"):
        load_adapter(str(path), 8, None)
    with pytest.raises(ConfigError, match="cannot read"):
        load_adapter(str(tmp_path / "missing.npz"), 4, None)
    (tmp_path / "bad.npz").write_bytes(b"not a numpy archive")
    with pytest.raises(ConfigError, match="cannot read"):
        load_adapter(str(tmp_path / "bad.npz"), 4, None)
    np.savez(tmp_path / "rect.npz", matrix=np.ones((4, 3)), probes=np.zeros((0, 4)), info=np.array("{}"))
    with pytest.raises(ConfigError, match="square"):
        load_adapter(str(tmp_path / "rect.npz"), 4, None)
    # the bundled map is for the bundled model: another model's probe vectors (here: hashing) leave queries unmapped
    hashed = np.asarray(HashEmbedder(384).embed_sync(list(PROBE_TEXTS)), dtype=np.float32)
    assert load_adapter("bundled", 384, hashed) is None
    assert load_adapter("bundled", 256, None) is None


def test_the_bundled_adapter_belongs_to_the_bundled_model() -> None:
    adapter = QueryAdapter.load(bundled_path())
    embedder = SentenceTransformerEmbedder()
    assert adapter.dimension == embedder.dimension
    probes = np.asarray(embedder.embed_sync(list(PROBE_TEXTS)), dtype=np.float32)
    assert adapter.matches(probes)
    assert load_adapter("bundled", embedder.dimension, probes) is not None
    assert adapter.info["data"].startswith("metatool")
    # a learned map, near the identity: it moves queries, it does not scramble them
    deviation = float(np.linalg.norm(adapter.matrix - np.eye(adapter.dimension)))
    assert 0.05 < deviation < 0.5 * np.sqrt(adapter.dimension)


def test_tool_search_uses_the_configured_adapter(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    QueryAdapter(np.eye(256, dtype=np.float32), np.zeros((0, 256), np.float32), {"data": "identity"}).save(path)
    embedding = EmbeddingSettings()
    search = ToolSearch(ExposureSettings(embedder="fake", query_adapter=str(path)), home=None, embedding=embedding)
    embedder = search._embedder_for_search()
    assert embedder is not None
    adapter = search._query_adapter(embedder)
    assert adapter is not None
    assert adapter.info == {"data": "identity"}
    # the default, with a model that is not the bundled one: no map
    default = ToolSearch(ExposureSettings(embedder="fake"), home=None, embedding=embedding)
    fake = default._embedder_for_search()
    assert fake is not None
    assert default._query_adapter(fake) is None
