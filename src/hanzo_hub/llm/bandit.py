"""A contextual bandit over models with neural Thompson sampling.

The reward model (a small MLP with one head per arm, see :mod:`hanzo_hub.llm.mlp_torch`) predicts each arm's
quality in [0, 1] from the query features, standardised by running statistics (:class:`FeatureScaler`). Thompson
sampling draws one MC-dropout sample of those predictions per decision; the arm with the best sampled
``quality - lam * cost / cost_scale`` among the eligible ones wins (``cost_scale`` is a reference cost shared across
requests, so ``lam`` prices dollars the same way for a short and a long prompt). Feedback goes into a replay buffer;
every ``update_every`` observations the model takes a few minibatch steps on it. A short round-robin warm-up and a
small uniform exploration floor keep every arm observed while the posterior is still flat. With ``knn_k > 0`` the
reward model's prediction is the prior of a per-arm Beta posterior updated by the rewards of the ``knn_k`` nearest
past observations (:mod:`hanzo_hub.llm.neighbours`), and then by the ``knn_local_k`` nearest (if set): the evidence
the router has near the query, where it has some; the Thompson draw comes from that posterior. A per-arm ridge
regression (:class:`LengthModel`) learns the answer length from the same feedback, so expected cost need not assume
one.

The heavy reward model loads through :data:`REWARD_MODELS`, so importing this module never imports torch.
"""

from __future__ import annotations

import contextlib
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

from hanzo_hub.llm.neighbours import Evidence, NeighbourIndex, posterior
from hanzo_hub.llm.neighbours import sample as beta_sample

__all__ = [
    "REWARD_MODELS",
    "BanditSettings",
    "FeatureScaler",
    "LengthModel",
    "NeuralThompsonBandit",
    "ReplayBuffer",
    "RewardModel",
]

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
    polyak: float = 0.99
    buffer_size: int = 20_000
    batch_size: int = 64
    update_every: int = 8
    grad_steps: int = 4
    warmup_per_arm: int = 10
    explore_floor: float = 0.02
    length_ridge: float = 1.0
    length_min_obs: int = 20
    knn_k: int = 400  # 0: the reward model alone; 400 / 10 chosen by bench/routing.py --tune (results/routing-tune-k*)
    knn_prior: float = 10.0
    knn_local_k: int = 0
    knn_local_prior: float = 25.0
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


class FeatureScaler:
    """Running mean and variance (Welford) of the features; :meth:`transform` standardises."""

    def __init__(self, dim: int) -> None:
        self.n = 0
        self.mu = np.zeros(dim, np.float64)
        self.m2 = np.zeros(dim, np.float64)

    def observe(self, x: FloatArray) -> None:
        self.n += 1
        d = x - self.mu
        self.mu += d / self.n
        self.m2 += d * (x - self.mu)

    def transform(self, x: FloatArray) -> FloatArray:
        if self.n < 2:
            return x.astype(np.float32)
        sd = np.sqrt(self.m2 / (self.n - 1)) + 1e-3
        out: FloatArray = ((x - self.mu) / sd).astype(np.float32)
        return out


class LengthModel:
    """Per-arm ridge regression of log(answer tokens) on the features, solved every ``refresh`` observations."""

    def __init__(self, n_arms: int, dim: int, ridge: float, refresh: int = 32) -> None:
        self.a = np.tile(np.eye(dim + 1) * ridge, (n_arms, 1, 1))
        self.b = np.zeros((n_arms, dim + 1))
        self.w = np.zeros((n_arms, dim + 1))
        self.n = np.zeros(n_arms, np.int64)
        self.refresh = refresh

    def observe(self, x: FloatArray, arm: int, tokens_out: float) -> None:
        z = np.append(x, 1.0)
        self.a[arm] += np.outer(z, z)
        self.b[arm] += z * np.log(max(tokens_out, 1.0))
        self.n[arm] += 1
        if self.n[arm] % self.refresh == 0 or self.n[arm] < self.refresh:
            self.w[arm] = np.linalg.solve(self.a[arm], self.b[arm])

    def predict(self, x: FloatArray) -> npt.NDArray[np.float64]:
        """(dim,) or (n, dim) features -> expected answer tokens per arm."""
        z = np.concatenate([x, np.ones((*x.shape[:-1], 1), x.dtype)], axis=-1)
        out: npt.NDArray[np.float64] = np.exp(np.clip(z @ self.w.T, -5.0, 12.0))
        return out


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
        self.neighbours = NeighbourIndex(s.buffer_size, dim) if s.knn_k > 0 else None
        self.model: RewardModel = _load(REWARD_MODELS[s.reward_model])(
            dim=dim,
            n_arms=len(self.arms),
            hidden=s.hidden,
            dropout=s.dropout,
            lr=s.lr,
            weight_decay=s.weight_decay,
            seed=s.seed,
            polyak=s.polyak,
        )
        self.scaler = FeatureScaler(dim)
        self.length = LengthModel(len(self.arms), dim, s.length_ridge)
        self.pulls = np.zeros(len(self.arms), np.int64)
        self.steps = 0

    def quality(self, x: FloatArray) -> FloatArray:
        """Mean predicted quality per arm for raw features ``x`` ((n, dim) -> (n, n_arms))."""
        q = self.model.mean(self.scaler.transform(x))
        return q if self.neighbours is None else posterior(q, self._evidence(x))[0]

    def _evidence(self, x: FloatArray) -> list[tuple[Evidence, float]]:
        """Per neighbourhood scale: the per-arm reward sums and counts near ``x``, and that level's prior strength."""
        assert self.neighbours is not None
        s, b = self.settings, self.buffer
        scales = [(s.knn_k, s.knn_prior)] + ([(s.knn_local_k, s.knn_local_prior)] if s.knn_local_k > 0 else [])
        ev = self.neighbours.stats(x, b.arm, b.reward, b.size, len(self.arms), [k for k, _ in scales])
        return [(e, p) for e, (_, p) in zip(ev, scales, strict=True)]

    def expected_tokens_out(self, x: FloatArray, default: float) -> npt.NDArray[np.float64]:
        """Learned answer length per arm for raw features ``x`` (dim,); ``default`` for arms with too few reports."""
        pred = self.length.predict(x)
        out: npt.NDArray[np.float64] = np.where(self.length.n >= self.settings.length_min_obs, pred, default)
        return out

    def scores(
        self, x: FloatArray, costs: FloatArray, lam: float, *, sample: bool = True, cost_scale: float | None = None
    ) -> FloatArray:
        """``quality - lam * cost / cost_scale`` per arm (default scale: the dearest arm), quality sampled or mean."""
        z = self.scaler.transform(x[None, :])
        q = (self.model.sample(z) if sample else self.model.mean(z))[0]
        if self.neighbours is not None:
            levels = self._evidence(x)
            q = (beta_sample(q[None, :], levels, self.rng) if sample else posterior(q[None, :], levels)[0])[0]
        scale = cost_scale or float(costs.max()) or 1.0
        out: FloatArray = (q - lam * costs / scale).astype(np.float32)
        return out

    def choose(
        self,
        x: FloatArray,
        costs: FloatArray,
        lam: float,
        eligible: npt.NDArray[np.bool_],
        cost_scale: float | None = None,
    ) -> tuple[int, str]:
        """Pick an eligible arm; returns (arm index, why)."""
        idx = np.flatnonzero(eligible)
        if idx.size == 0:
            raise ValueError("no eligible arm")
        cold = idx[self.pulls[idx] < self.settings.warmup_per_arm]
        if cold.size:
            return int(cold[np.argmin(self.pulls[cold])]), "warm-up"
        if self.rng.random() < self.settings.explore_floor:
            return int(self.rng.choice(idx)), "explore"
        s = self.scores(x, costs, lam, cost_scale=cost_scale)
        return int(idx[np.argmax(s[idx])]), "thompson"

    def record_pull(self, arm: int) -> None:
        """Count a pull at decision time (warm-up uses it even before feedback arrives)."""
        self.pulls[arm] += 1

    def update(self, x: FloatArray, arm: int, reward: float, tokens_out: float | None = None) -> None:
        """Store feedback (and the answer length, when known); train every ``update_every`` observations."""
        self.scaler.observe(x)
        if self.neighbours is not None:
            self.neighbours.put(self.buffer.head, x)
        self.buffer.add(x, arm, float(np.clip(reward, 0.0, 1.0)))
        if tokens_out is not None:
            self.length.observe(x, arm, tokens_out)
        self.steps += 1
        if self.steps % self.settings.update_every == 0:
            self.train(self.settings.grad_steps)

    def train(self, steps: int) -> float:
        """``steps`` minibatch steps on the replay buffer; returns the last loss."""
        loss = 0.0
        for _ in range(steps):
            x, a, r = self.buffer.sample(self.rng, self.settings.batch_size)
            loss = self.model.train_step(self.scaler.transform(x), a, r)
        return loss

    def save(self, path: str | Path) -> None:
        """Persist weights, optimiser, replay buffer and counters atomically to one ``.npz`` file."""
        path = Path(path)
        meta = {"arms": self.arms, "dim": self.dim, "settings": asdict(self.settings), "steps": self.steps}
        b = self.buffer
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
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
                    scaler=np.concatenate([[self.scaler.n], self.scaler.mu, self.scaler.m2]),
                    len_a=self.length.a,
                    len_b=self.length.b,
                    len_w=self.length.w,
                    len_n=self.length.n,
                )
            os.replace(tmp, path)
        except BaseException:  # a full disk: leave the previous file, not a partial temporary one
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

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
            if bandit.neighbours is not None:
                bandit.neighbours.rebuild(bandit.buffer.x[:n])
            bandit.rng.bit_generator.state = json.loads(z["rng"].tobytes())
            sc, d = z["scaler"], meta["dim"]
            bandit.scaler.n, bandit.scaler.mu, bandit.scaler.m2 = int(sc[0]), sc[1 : 1 + d].copy(), sc[1 + d :].copy()
            ln = bandit.length
            ln.a, ln.b, ln.w, ln.n = z["len_a"].copy(), z["len_b"].copy(), z["len_w"].copy(), z["len_n"].copy()
        return bandit
