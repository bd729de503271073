"""Cross-encoder re-ranking of recall: a real (tiny, randomly initialised) sentence-transformers CrossEncoder saved
by the test, so the wiring is exercised end to end without downloading anything. The model says nothing about
quality; the tests check that recall orders what it scores by the fused score plus its score, and only that."""

from pathlib import Path

import pytest

from hanzo_hub.config import MemorySettings
from hanzo_hub.errors import ConfigError
from hanzo_hub.memory import MemoryScope, MemoryService
from hanzo_hub.memory.rerank import CrossEncoderReranker
from hanzo_hub.vectors.fake import HashEmbedder

SCOPE = MemoryScope(user="ana", project="p1", session="s1")
QUERY = "where is the staging database port"
WORDS = [
    "the",
    "my",
    "a",
    "is",
    "on",
    "at",
    "in",
    "of",
    "to",
    "and",
    "staging",
    "database",
    "port",
    "sister",
    "nurse",
    "job",
    "new",
    "cat",
    "dog",
    "city",
    "moved",
    "car",
]
MEMORIES = [
    "the staging database is on port 5433",
    "my sister has a new job as a nurse",
    "my cat and my dog moved to a new city",
    "the car is in the city",
    "a new database port",
]


def tiny_cross_encoder(path: Path, labels: int = 1, seed: int = 0) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    path.mkdir(parents=True, exist_ok=True)
    vocab = path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64, num_labels=labels, initializer_range=0.2,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    tokenizer = BertTokenizer(str(vocab))
    pairs = tokenizer([QUERY] * len(MEMORIES), MEMORIES, padding=True, return_tensors="pt")
    with torch.no_grad():  # centre and spread the logits on these pairs (sd 2), so that the scores differ clearly
        logits = model.bert(**pairs).pooler_output @ model.classifier.weight.T
        scale = 2.0 / float(logits.std())
        model.classifier.weight.mul_(scale)
        model.classifier.bias.copy_(-logits.mean(0) * scale)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_the_reranker_scores_pairs_in_0_1_deterministically(tmp_path: Path) -> None:
    reranker = CrossEncoderReranker(tiny_cross_encoder(tmp_path / "ce"))
    scores = reranker.scores(QUERY, MEMORIES)
    assert len(scores) == len(MEMORIES)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert max(scores) - min(scores) > 0.1  # the texts are told apart
    assert reranker.scores(QUERY, MEMORIES) == scores
    assert reranker.scores("anything", []) == []


async def test_recall_reorders_the_top_hits_by_the_cross_encoder(tmp_path: Path) -> None:
    model = tiny_cross_encoder(tmp_path / "ce")
    query = QUERY
    expected = CrossEncoderReranker(model).scores(query, MEMORIES)
    base = {"store": "memory", "embedder": "fake", "query_adapter": "none", "project": {"k": 10, "threshold": -1}}

    async def recall(**overrides: object) -> list[tuple[str, float | None, str]]:
        settings = MemorySettings.model_validate(base | overrides)
        async with MemoryService.open(settings, tmp_path, HashEmbedder()) as svc:
            await svc.remember(SCOPE, MEMORIES)
            hits = await svc.recall(SCOPE, query, tiers=("project",))
            return [(h.entry.content, h.rerank, h.why) for h in hits]

    plain = await recall()
    assert all(r is None for _, r, _ in plain)
    assert all("cross-encoder" not in why for _, _, why in plain)
    # a weight that dwarfs the fused score: the order is the cross-encoder's
    ranked = await recall(reranker=str(model), rerank_weight=1000.0)
    by_model = sorted(MEMORIES, key=lambda m: -expected[MEMORIES.index(m)])
    assert [c for c, _, _ in ranked] == by_model
    assert [r for _, r, _ in ranked] == pytest.approx(sorted(expected, reverse=True), abs=1e-6)
    assert all("cross-encoder" in why for _, _, why in ranked)
    # only the best rerank_top of the fused ranking are scored; the rest keep their fused order behind them
    top2 = await recall(reranker=str(model), rerank_weight=1000.0, rerank_top=2)
    fused = [c for c, _, _ in plain]
    assert sorted(c for c, _, _ in top2[:2]) == sorted(fused[:2])
    assert sorted(c for c, _, _ in top2[2:]) == sorted(fused[2:])
    assert top2[2][0] == fused[2]  # (the last two tie on the fused score)
    assert all(r is None for _, r, _ in top2[2:])
    # weight 0: scored and shown, but the fused order stands
    zero = await recall(reranker=str(model), rerank_weight=0.0)
    assert [c for c, _, _ in zero][:3] == fused[:3]  # (the last two tie on the fused score)
    assert all(r is not None for _, r, _ in zero)


async def test_a_missing_or_unfit_reranker_is_a_clear_error(tmp_path: Path) -> None:
    for folder, match in (
        (tmp_path / "missing", "no such model folder"),
        (tiny_cross_encoder(tmp_path / "two", labels=2), "2 scores per pair"),
    ):
        settings = MemorySettings(store="memory", embedder="fake", reranker=folder, query_adapter="none")
        async with MemoryService.open(settings, tmp_path, HashEmbedder()) as svc:
            await svc.remember(SCOPE, MEMORIES[:2])
            with pytest.raises(ConfigError, match=match):
                await svc.recall(SCOPE, "staging database")
