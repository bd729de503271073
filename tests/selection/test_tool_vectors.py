"""The shipped catalog tool vectors: current for every catalog tool, the model's own output, used by the index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hanzo_hub.catalog.tool_vectors import TOOL_VECTORS, load_tool_vectors, shipped_model_id
from hanzo_hub.selection.dense import SyncStats, sync_index
from hanzo_hub.selection.text import content_hash
from hanzo_hub.vectors.chroma_store import ChromaVectorStore
from hanzo_hub.vectors.fake import HashEmbedder
from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder
from tests.selection.tool_vectors_build import catalog_tools


async def test_shipped_vectors_cover_every_catalog_tool(tmp_path: Path) -> None:
    """CI catches a stale file: run scripts/build-tool-vectors after changing a manifest's tools."""
    model_id = SentenceTransformerEmbedder().model_id
    assert shipped_model_id() == model_id
    assert TOOL_VECTORS.stat().st_size < 2_000_000
    tools, search = await catalog_tools(tmp_path)
    shipped = load_tool_vectors(model_id)
    missing = [tool.name for tool, h in zip(tools, search.hashes(tools, model_id), strict=True) if h not in shipped]
    assert len(tools) > 700
    assert missing == [], f"{len(missing)} catalog tools have no shipped vector; run scripts/build-tool-vectors"
    assert load_tool_vectors("another-model") == {}


@pytest.mark.model
async def test_shipped_vectors_are_the_models_output(tmp_path: Path) -> None:
    embedder = SentenceTransformerEmbedder()
    tools, search = await catalog_tools(tmp_path)
    picked = tools[:: max(1, len(tools) // 6)][:6]
    fresh = np.asarray(await embedder.embed(search.texts(picked)), dtype=np.float32)
    shipped = load_tool_vectors(embedder.model_id)
    stored = np.stack([shipped[h] for h in search.hashes(picked, embedder.model_id)])
    cosines = (fresh * stored).sum(axis=1) / (np.linalg.norm(fresh, axis=1) * np.linalg.norm(stored, axis=1))
    assert cosines.min() > 0.999


async def test_sync_takes_seeds_by_hash_and_embeds_the_rest(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    texts = ["Add two integers.", "Echo the text.", "Ping a host."]
    seed = np.asarray(await embedder.embed([texts[0]]), dtype=np.float32)[0]
    seeds = {content_hash(texts[0], embedder.model_id): seed, content_hash(texts[1], "other-model"): seed}
    store = ChromaVectorStore(tmp_path / "index")
    index, stats = await sync_index(["a", "b", "c"], texts, embedder, store, seeds=seeds)
    assert stats == SyncStats(embedded=2, reused=0, deleted=0, seeded=1)
    assert np.allclose(index.matrix[0], seed, atol=1e-6)
    changed = ["Add two integers.", "Echo the text back.", "Ping a host."]
    _, again = await sync_index(["a", "b", "c"], changed, embedder, store, seeds=seeds)
    assert again == SyncStats(embedded=1, reused=2, deleted=0, seeded=0)
    await store.aclose()
