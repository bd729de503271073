"""A contextual bandit over models with neural Thompson sampling.

The reward model (a small MLP with one head per arm, see :mod:`hanzo_hub.llm.mlp_torch`) predicts each arm's
quality in [0, 1] from the query features. Thompson sampling draws one MC-dropout sample of those predictions per
decision; the arm with the best sampled ``quality - lam * cost / max_cost`` among the eligible ones wins. Feedback goes
into a replay buffer; every ``update_every`` observations the model takes a few minibatch steps on it. A short
round-robin warm-up and a small uniform exploration floor keep every arm observed while the posterior is still flat.

The heavy reward model loads through :data:`REWARD_MODELS`, so importing this module never imports torch.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["REWARD_MODELS", "BanditSettings", "NeuralThompsonBandit", "ReplayBuffer", "RewardModel"]

FloatArray = npt.NDArray[np.float32]

REWARD_MODELS: dict[str, str] = {
    "torch-mlp": "hanzo_hub.llm.mlp_torch:TorchMLPRewardModel",
}


class RewardModel(Protocol):
    """Predicts per-arm quality; ``sample`` is stochastic (MC dropout), ``mean`` is not."""

    def sample(self, x: FloatArray) -> FloatArray:
        """(n, dim) -> (n, n_arms), one posterior sample per row."""
        ...

    def mean(self, x: FloatArray) -> FloatArray:
        """(n, dim) -> (n, n_arms), the deterministic prediction."""
        ...

    def train_step(self, x: FloatArray, arms: npt.NDArray[np.int64], rewards: FloatArray) -> float:
        """One optimiser step on the observed arms' rewards; returns the loss."""
        ...

    def state_bytes(self) -> bytes:
        """Serialised weights and optimiser state."""
        ...

    def load_state_bytes(self, data: bytes) -> None:
        """Restore from :meth:`state_bytes`."""
        ...


@dataclass(frozen=True)
class BanditSettings:
    """Hyperparameters (chosen a priori, not tuned on the benchmark's test halves)."""

    hidden: int = 64
    dropout: float = 0.2
    lr: float = 3e-3
    weight_decay: float = 1e-4
    buffer_size: int = 20_000
    batch_size: int = 64
    update_every: int = 8
    grad_steps: int = 4
    warmup_per_arm: int = 10
    explore_floor: float = 0.02
    seed: int = 0
    reward_model: str = "torch-mlp"


class ReplayBuffer:
    """A ring buffer of (features, arm, reward)."""

    def __init__(self, capacity: int, dim: int) -> None:
        self.x = np.zeros((capacity, dim), np.float32)
        self.arm = np.zeros(capacity, np.int64)
        self.reward = np.zeros(capacity, np.float32)
        self.capacity = capacity
        self.size = 0
        self.head = 0

    def add(self, x: FloatArray, arm: int, reward: float) -> None:
        self.x[self.head] = x
        self.arm[self.head] = arm
        self.reward[self.head] = reward
        self.head = (self.head + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, rng: np.random.Generator, n: int) -> tuple[FloatArray, npt.NDArray[np.int64], FloatArray]:
        idx = rng.integers(0, self.size, size=min(n, self.size))
        return self.x[idx], self.arm[idx], self.reward[idx]


def _load(import_string: str) -> type:
    module, _, attr = import_string.partition(":")
    cls: type = getattr(importlib.import_module(module), attr)
    return cls


class NeuralThompsonBandit:
    """Neural Thompson sampling over ``arms`` (model ids) for ``dim``-dimensional query features."""

    def __init__(self, arms: Sequence[str], dim: int, settings: BanditSettings | None = None) -> None:
        self.arms = tuple(arms)
        self.dim = dim
        self.settings = settings or BanditSettings()
        s = self.settings
        self.rng = np.random.default_rng(s.seed)
        self.buffer = ReplayBuffer(s.buffer_size, dim)
        self.model: RewardModel = _load(REWARD_MODELS[s.reward_model])(
            dim=dim,
            n_arms=len(self.arms),
            hidden=s.hidden,
            dropout=s.dropout,
            lr=s.lr,
            weight_decay=s.weight_decay,
            seed=s.seed,
        )
        self.pulls = np.zeros(len(self.arms), np.int64)
        self.steps = 0

    def scores(self, x: FloatArray, costs: FloatArray, lam: float, *, sample: bool = True) -> FloatArray:
        """``quality - lam * cost / max(cost)`` per arm, with quality sampled (Thompson) or the mean."""
        q = (self.model.sample(x[None, :]) if sample else self.model.mean(x[None, :]))[0]
        scale = float(costs.max()) or 1.0
        out: FloatArray = (q - lam * costs / scale).astype(np.float32)
        return out

    def choose(self, x: FloatArray, costs: FloatArray, lam: float, eligible: npt.NDArray[np.bool_]) -> tuple[int, str]:
        """Pick an eligible arm; returns (arm index, why)."""
        idx = np.flatnonzero(eligible)
        if idx.size == 0:
            raise ValueError("no eligible arm")
        cold = idx[self.pulls[idx] < self.settings.warmup_per_arm]
        if cold.size:
            return int(cold[np.argmin(self.pulls[cold])]), "warm-up"
        if self.rng.random() < self.settings.explore_floor:
            return int(self.rng.choice(idx)), "explore"
        s = self.scores(x, costs, lam)
        return int(idx[np.argmax(s[idx])]), "thompson"

    def record_pull(self, arm: int) -> None:
        """Count a pull at decision time (warm-up uses it even before feedback arrives)."""
        self.pulls[arm] += 1

    def update(self, x: FloatArray, arm: int, reward: float) -> None:
        """Store feedback; train every ``update_every`` observations."""
        self.buffer.add(x, arm, float(np.clip(reward, 0.0, 1.0)))
        self.steps += 1
        if self.steps % self.settings.update_every == 0:
            self.train(self.settings.grad_steps)

    def train(self, steps: int) -> float:
        """``steps`` minibatch steps on the replay buffer; returns the last loss."""
        loss = 0.0
        for _ in range(steps):
            x, a, r = self.buffer.sample(self.rng, self.settings.batch_size)
            loss = self.model.train_step(x, a, r)
        return loss

    def save(self, path: str | Path) -> None:
        """Persist weights, optimiser, replay buffer and counters atomically to one ``.npz`` file."""
        path = Path(path)
        meta = {"arms": self.arms, "dim": self.dim, "settings": asdict(self.settings), "steps": self.steps}
        b = self.buffer
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.savez(
                fh,
                meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
                model=np.frombuffer(self.model.state_bytes(), np.uint8),
                pulls=self.pulls,
                bx=b.x[: b.size],
                barm=b.arm[: b.size],
                breward=b.reward[: b.size],
                bhead=np.array([b.head]),
                rng=np.frombuffer(json.dumps(self.rng.bit_generator.state).encode(), np.uint8),
            )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> NeuralThompsonBandit:
        """Restore a bandit saved with :meth:`save`."""
        with np.load(Path(path)) as z:
            meta = json.loads(z["meta"].tobytes())
            bandit = cls(meta["arms"], meta["dim"], BanditSettings(**meta["settings"]))
            bandit.model.load_state_bytes(io.BytesIO(z["model"].tobytes()).getvalue())
            bandit.pulls = z["pulls"].copy()
            bandit.steps = int(meta["steps"])
            n = len(z["barm"])
            bandit.buffer.x[:n], bandit.buffer.arm[:n], bandit.buffer.reward[:n] = z["bx"], z["barm"], z["breward"]
            bandit.buffer.size, bandit.buffer.head = n, int(z["bhead"][0])
            bandit.rng.bit_generator.state = json.loads(z["rng"].tobytes())
        return bandit
