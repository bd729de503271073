"""The memory query adapter: recall maps the query vector only, the bundled map only for its model."""

from pathlib import Path

import numpy as np
import pytest

from hanzo_hub.config import MemorySettings
from hanzo_hub.errors import ConfigError
from hanzo_hub.memory import MemoryScope, MemoryService
from hanzo_hub.memory.adapter import bundled_path, memory_adapter
from hanzo_hub.selection.adapter import PROBE_TEXTS, QueryAdapter
from hanzo_hub.vectors.fake import HashEmbedder
from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

SCOPE = MemoryScope(user="ana", project="p1", session="s1")
A = "the staging database lives on port 5433"
B = "my sister started a new job as a nurse"


def _swap(embedder: HashEmbedder, a: str, b: str, path: Path) -> Path:
    """An orthogonal map sending ``a``'s vector onto ``b``'s (a Householder reflection), saved at ``path``."""
    va, vb = (np.asarray(embedder.embed_sync([t])[0]) for t in (a, b))
    u = (va - vb) / np.linalg.norm(va - vb)
    matrix = (np.eye(len(u)) - 2 * np.outer(u, u)).astype(np.float32)
    QueryAdapter(matrix, np.zeros((0, len(u)), np.float32), {"data": "swap"}).save(path)
    return path


async def _recall_first(settings: MemorySettings, tmp_path: Path) -> tuple[str, QueryAdapter | None]:
    async with MemoryService.open(settings, tmp_path, HashEmbedder(), lambda: 1_700_000_000.0) as svc:
        await svc.remember(SCOPE, [A, B])
        hits = await svc.recall(SCOPE, A, tiers=("project",))
        stored = await svc.entries(SCOPE)
        assert {tuple(e.embedding) for e in await (await svc.store.scope(SCOPE.key("project"))).with_embeddings()} == {
            tuple(v) for v in HashEmbedder().embed_sync([e.content for e in stored])
        }  # memories keep the embedder's vectors, mapped or not
        return hits[0].entry.content, await svc.query_adapter()


async def test_recall_maps_the_query_and_only_the_query(tmp_path: Path) -> None:
    lexical_off = {"store": "memory", "embedder": "fake", "lexical": False, "project": {"k": 5, "threshold": -1}}
    first, adapter = await _recall_first(MemorySettings.model_validate(lexical_off), tmp_path / "plain")
    assert first == A  # the bundled map is for MiniLM: with the hashing embedder queries go unmapped
    assert adapter is None

    path = _swap(HashEmbedder(), A, B, tmp_path / "swap.npz")
    first, adapter = await _recall_first(
        MemorySettings.model_validate(lexical_off | {"query_adapter": str(path)}), tmp_path / "mapped"
    )
    assert first == B
    assert adapter is not None
    assert adapter.info == {"data": "swap"}

    first, adapter = await _recall_first(
        MemorySettings.model_validate(lexical_off | {"query_adapter": "none"}), tmp_path / "none"
    )
    assert first == A
    assert adapter is None


async def test_a_broken_adapter_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad.npz").write_bytes(b"not numpy")
    settings = MemorySettings(store="memory", embedder="fake", query_adapter=str(tmp_path / "bad.npz"))
    async with MemoryService.open(settings, tmp_path, HashEmbedder()) as svc:
        with pytest.raises(ConfigError, match="cannot read"):
            await svc.recall(SCOPE, "anything")


def test_the_bundled_memory_adapter_belongs_to_the_bundled_model_and_moves_questions_to_answers() -> None:
    embedder = SentenceTransformerEmbedder()
    adapter = memory_adapter("bundled", embedder)
    assert adapter is not None
    assert adapter.info["data"].startswith("longmemeval oracle")
    assert QueryAdapter.load(bundled_path()).matches(np.asarray(embedder.embed_sync(list(PROBE_TEXTS))))
    assert memory_adapter("bundled", HashEmbedder(384)) is None
    deviation = float(np.linalg.norm(adapter.matrix - np.eye(adapter.dimension)))
    assert 0.05 < deviation < 0.5 * np.sqrt(adapter.dimension)
    # a sanity check on questions about the past and the statements that answer them, among other chat lines
    # (written for this test; the measured effect is LongMemEval's, in bench/results/memory.md): the map keeps
    # every answer first, it does not scramble the space
    pairs = [
        ("What does my sister do for a living?", "By the way, my sister just started working as a nurse."),
        ("Which city did I move to last spring?", "I moved to Denver in April and I'm still unpacking boxes."),
        ("How many cats do I have?", "Can you suggest toys? I have three cats and they get bored easily."),
        ("What car did I buy recently?", "I finally bought a used Honda Civic last week, so I need insurance tips."),
    ]
    distractors = [
        "Can you recommend some good books on productivity?",
        "What's the best way to learn Python quickly?",
        "I need a recipe for a vegetarian lasagna.",
        "How do I fix a leaking kitchen faucet?",
    ]
    questions = np.asarray(embedder.embed_sync([q for q, _ in pairs]), dtype=np.float32)
    lines = np.asarray(embedder.embed_sync([a for _, a in pairs] + distractors), dtype=np.float32)
    assert (np.argmax(adapter(questions) @ lines.T, axis=1) == np.arange(len(pairs))).all()
