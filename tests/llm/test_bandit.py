from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hanzo_hub.llm.bandit import BanditSettings, NeuralThompsonBandit  # noqa: E402

ARMS = ("cheap-bad", "value", "premium")
QUALITY = np.array([0.3, 0.8, 0.85])
COSTS = np.array([0.5, 1.0, 10.0], np.float32)


def _stream(bandit: NeuralThompsonBandit, n: int, rng: np.random.Generator, lam: float) -> list[int]:
    chosen = []
    eligible = np.ones(len(ARMS), bool)
    for _ in range(n):
        x = rng.normal(size=bandit.dim).astype(np.float32)
        arm, _ = bandit.choose(x, COSTS, lam, eligible)
        bandit.record_pull(arm)
        bandit.update(x, arm, float(rng.random() < QUALITY[arm]))
        chosen.append(arm)
    return chosen


def test_bandit_converges_to_the_model_best_per_dollar() -> None:
    rng = np.random.default_rng(1)
    bandit = NeuralThompsonBandit(ARMS, dim=8, settings=BanditSettings(hidden=32, seed=3))
    chosen = _stream(bandit, 1500, rng, lam=0.2)
    tail = np.array(chosen[-300:])
    shares = [(tail == arm).mean() for arm in range(len(ARMS))]
    # MC-dropout keeps exploring (about 10-18% of late pulls still go to premium across seeds and machines), so
    # the bar is "clearly the best per dollar", not near-exclusive choice; random choice would give 0.33.
    assert shares[1] >= 0.75
    assert shares[1] == max(shares)
    mean = bandit.model.mean(np.zeros((1, 8), np.float32))[0]
    assert mean[1] > mean[0]


def test_contextual_bandit_learns_which_model_wins_where() -> None:
    # premium is worth its price only when x[0] > 0 (the cheap one fails there)
    rng = np.random.default_rng(2)
    bandit = NeuralThompsonBandit(("cheap", "premium"), dim=4, settings=BanditSettings(hidden=32, seed=0))
    costs = np.array([1.0, 10.0], np.float32)
    eligible = np.ones(2, bool)
    hits = []
    for t in range(3000):
        x = rng.normal(size=4).astype(np.float32)
        hard = x[0] > 0
        arm, _ = bandit.choose(x, costs, 0.3, eligible)
        bandit.record_pull(arm)
        q = [0.2 if hard else 0.9, 0.95]
        bandit.update(x, arm, float(rng.random() < q[arm]))
        if t >= 2500:
            hits.append(arm == int(hard))
    assert np.mean(hits) >= 0.8


def test_persistence_round_trip_restores_predictions_buffer_and_rng(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    bandit = NeuralThompsonBandit(ARMS, dim=8, settings=BanditSettings(hidden=16))
    _stream(bandit, 200, rng, lam=0.2)
    path = tmp_path / "bandit.npz"
    bandit.save(path)
    restored = NeuralThompsonBandit.load(path)
    probe = rng.normal(size=(5, 8)).astype(np.float32)
    np.testing.assert_allclose(restored.model.mean(probe), bandit.model.mean(probe), rtol=1e-6)
    assert restored.buffer.size == bandit.buffer.size == 200
    np.testing.assert_array_equal(restored.pulls, bandit.pulls)
    assert restored.steps == bandit.steps
    # training continues identically from the restored state
    torch.manual_seed(7)  # dropout masks come from torch's global generator
    bandit.train(3)
    torch.manual_seed(7)
    restored.train(3)
    np.testing.assert_allclose(restored.model.mean(probe), bandit.model.mean(probe), rtol=1e-5)
    assert not list(tmp_path.glob("*.tmp"))


def test_choose_respects_eligibility() -> None:
    bandit = NeuralThompsonBandit(ARMS, dim=4, settings=BanditSettings(warmup_per_arm=0, explore_floor=0.0))
    x = np.zeros(4, np.float32)
    for _ in range(20):
        arm, _ = bandit.choose(x, COSTS, 0.0, np.array([True, False, False]))
        assert arm == 0
    with pytest.raises(ValueError, match="eligible"):
        bandit.choose(x, COSTS, 0.0, np.zeros(3, bool))
