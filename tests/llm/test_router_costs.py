"""Cost awareness: learned answer lengths, one cost scale across requests, the pacer, persistence of it all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from hanzo_hub.llm.bandit import BanditSettings, LengthModel, NeuralThompsonBandit
from hanzo_hub.llm.classify import CategoryClassifier
from hanzo_hub.llm.registry import load_registry
from hanzo_hub.llm.router import CostPacer, Policy, Router, RouteRequest

MODELS = ["mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"]
DIM = 8


def _router(pacer: CostPacer | None = None, **settings: object) -> Router:
    reg = load_registry().subset(MODELS)
    centroids = np.eye(8, DIM, dtype=np.float32)
    bandit = NeuralThompsonBandit(reg.ids(), DIM + 8, BanditSettings(hidden=16, **settings))  # type: ignore[arg-type]
    return Router(reg, CategoryClassifier(centroids), bandit, pacer)


def _vec(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def test_length_model_learns_per_arm_answer_lengths() -> None:
    rng = np.random.default_rng(0)
    lm = LengthModel(n_arms=2, dim=3, ridge=1.0)
    for _ in range(400):
        x = rng.normal(size=3)
        lm.observe(x, 0, 10.0)  # arm 0: always terse
        lm.observe(x, 1, 400.0 if x[0] > 0 else 40.0)  # arm 1: long answers where x[0] > 0
    pred = lm.predict(np.array([[1.5, 0, 0], [-1.5, 0, 0]]))
    assert pred[:, 0] == pytest.approx([10.0, 10.0], rel=0.05)
    assert pred[0, 1] > 3 * pred[1, 1]


def test_router_prices_requests_with_learned_lengths_once_it_has_reports() -> None:
    router = _router(warmup_per_arm=0, length_min_obs=20)
    rng = np.random.default_rng(1)
    reg = router.registry
    first = router.route(RouteRequest(_vec(rng), tokens_in=1000, policy=Policy(kind="pinned", model=MODELS[1])))
    assert first.est_cost == pytest.approx(reg[MODELS[1]].cost(1000, 256))  # no reports yet: the default length
    for _ in range(40):
        d = router.route(RouteRequest(_vec(rng), tokens_in=1000, policy=Policy(kind="pinned", model=MODELS[1])))
        router.feedback(d, 1.0, tokens_out=2.0)
    d = router.route(RouteRequest(_vec(rng), tokens_in=1000, policy=Policy(kind="pinned", model=MODELS[1])))
    assert d.est_cost == pytest.approx(reg[MODELS[1]].cost(1000, 2.0), rel=0.05)
    given = router.route(RouteRequest(_vec(rng), 1000, 500.0, policy=Policy(kind="pinned", model=MODELS[1])))
    assert given.est_cost == pytest.approx(reg[MODELS[1]].cost(1000, 500))  # the caller's estimate wins


def test_one_cost_scale_makes_long_prompts_dearer_than_short_ones() -> None:
    bandit = NeuralThompsonBandit(("cheap", "dear"), dim=4, settings=BanditSettings(hidden=8))
    x = np.zeros(4, np.float32)
    short, long_ = np.array([0.01, 0.1], np.float32), np.array([0.1, 1.0], np.float32)
    # per-request scaling sees the same trade-off for both; a shared scale charges the long prompt 10x more
    a = bandit.scores(x, short, lam=0.5, sample=False)
    b = bandit.scores(x, long_, lam=0.5, sample=False)
    assert a[1] - a[0] == pytest.approx(b[1] - b[0])
    a = bandit.scores(x, short, lam=0.5, sample=False, cost_scale=1.0)
    b = bandit.scores(x, long_, lam=0.5, sample=False, cost_scale=1.0)
    assert (b[0] - b[1]) == pytest.approx(10 * (a[0] - a[1]))


def test_pacer_holds_the_spend_near_its_target_share() -> None:
    # the dear model is always better, so only the pacer's lam keeps the spend down
    router = _router(CostPacer(target=0.3), warmup_per_arm=5)
    rng = np.random.default_rng(2)
    spent = reference = 0.0
    short_strong = long_strong = 0
    for t in range(1500):
        tokens_in = float(rng.choice([100.0, 3000.0]))
        d = router.route(RouteRequest(_vec(rng), tokens_in=tokens_in, tokens_out=100.0))
        router.feedback(d, 0.9 if d.model == MODELS[1] else 0.5)
        if t >= 500:
            spent += d.est_cost
            reference += router.registry[MODELS[1]].cost(tokens_in, 100.0)
            strong = d.model == MODELS[1]
            short_strong += strong and tokens_in < 1000
            long_strong += strong and tokens_in > 1000
    assert 0.2 <= spent / reference <= 0.4
    assert short_strong > 2 * long_strong  # the budget goes where a dollar buys the most


def test_save_load_round_trip_keeps_scaler_and_length_model(tmp_path: Path) -> None:
    router = _router(warmup_per_arm=0)
    rng = np.random.default_rng(3)
    for _ in range(60):
        d = router.route(RouteRequest(_vec(rng), tokens_in=300))
        router.feedback(d, float(rng.random()), tokens_out=float(rng.integers(5, 500)))
    router.bandit.save(tmp_path / "b.npz")
    restored = NeuralThompsonBandit.load(tmp_path / "b.npz")
    probe = np.stack([router.features(_vec(rng))[0] for _ in range(4)])
    np.testing.assert_allclose(restored.quality(probe), router.bandit.quality(probe), rtol=1e-6)
    np.testing.assert_allclose(
        restored.expected_tokens_out(probe[0], 256.0), router.bandit.expected_tokens_out(probe[0], 256.0)
    )
    assert restored.scaler.n == router.bandit.scaler.n == 60
