"""The torch adapter: a small MLP reward model with MC-dropout sampling (loaded via ``bandit.REWARD_MODELS``).

Per-arm quality logits = a linear path on the (standardised) features + a dropout MLP trunk, with one output per
arm. :meth:`TorchMLPRewardModel.sample` keeps dropout on (one posterior sample per call, the Thompson draw);
:meth:`TorchMLPRewardModel.mean` uses a Polyak (exponential moving) average of the weights with dropout off, which
is much less noisy than the last SGD iterate when the rewards are 0/1 outcomes.
"""

from __future__ import annotations

import copy
import io

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

__all__ = ["TorchMLPRewardModel"]

FloatArray = npt.NDArray[np.float32]


class _Net(nn.Module):
    def __init__(self, dim: int, hidden: int, n_arms: int, dropout: float) -> None:
        super().__init__()
        self.inp = nn.Dropout(dropout / 2)
        self.trunk = nn.Sequential(
            nn.Linear(dim, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
        )
        self.head = nn.Linear(hidden, n_arms)
        self.linear = nn.Linear(dim, n_arms)
        # a flat prior: every arm starts at quality 0.5, so untrained choices follow cost alone
        for layer in (self.head, self.linear):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        out: torch.Tensor = self.head(self.trunk(x)) + self.linear(x)
        return out


class TorchMLPRewardModel:
    """Per-arm quality logits; dropout stays on for :meth:`sample`, :meth:`mean` uses averaged weights."""

    def __init__(
        self,
        *,
        dim: int,
        n_arms: int,
        hidden: int,
        dropout: float,
        lr: float,
        weight_decay: float,
        seed: int,
        polyak: float = 0.99,
    ) -> None:
        gen = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            self.net = _Net(dim, hidden, n_arms, dropout)
        self.avg = copy.deepcopy(self.net)
        self.avg.eval()
        self.polyak = polyak
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=lr, weight_decay=weight_decay)

    @torch.no_grad()
    def sample(self, x: FloatArray) -> FloatArray:
        self.net.train()
        out: FloatArray = torch.sigmoid(self.net(torch.from_numpy(np.ascontiguousarray(x)))).numpy()
        return out

    @torch.no_grad()
    def mean(self, x: FloatArray) -> FloatArray:
        out: FloatArray = torch.sigmoid(self.avg(torch.from_numpy(np.ascontiguousarray(x)))).numpy()
        return out

    def train_step(self, x: FloatArray, arms: npt.NDArray[np.int64], rewards: FloatArray) -> float:
        self.net.train()
        logits = self.net(torch.from_numpy(np.ascontiguousarray(x)))
        chosen = logits.gather(1, torch.from_numpy(arms)[:, None])[:, 0]
        loss = nn.functional.binary_cross_entropy_with_logits(chosen, torch.from_numpy(rewards))
        self.opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        self.opt.step()
        with torch.no_grad():
            for a, p in zip(self.avg.parameters(), self.net.parameters(), strict=True):
                a.mul_(self.polyak).add_(p, alpha=1.0 - self.polyak)
        return float(loss.detach())

    def state_bytes(self) -> bytes:
        buf = io.BytesIO()
        torch.save({"net": self.net.state_dict(), "avg": self.avg.state_dict(), "opt": self.opt.state_dict()}, buf)
        return buf.getvalue()

    def load_state_bytes(self, data: bytes) -> None:
        state = torch.load(io.BytesIO(data), weights_only=True)
        self.net.load_state_dict(state["net"])
        self.avg.load_state_dict(state["avg"])
        self.opt.load_state_dict(state["opt"])
