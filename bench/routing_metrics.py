"""Routing metrics for two-model replay: threshold sweeps, PGR, APGR, CPT and quality share at a cost share."""

from __future__ import annotations

import numpy as np


def sweep(
    score: np.ndarray, q_w: np.ndarray, q_s: np.ndarray, c_w: np.ndarray, c_s: np.ndarray
) -> dict[str, np.ndarray]:
    """Route the top-k items by ``score`` to the strong model, for k = 0..n."""
    order = np.argsort(-score, kind="stable")
    n = len(score)
    gain_q = np.concatenate([[0.0], np.cumsum((q_s - q_w)[order])])
    gain_c = np.concatenate([[0.0], np.cumsum((c_s - c_w)[order])])
    quality = (q_w.sum() + gain_q) / n
    cost = c_w.sum() + gain_c
    return {"frac_strong": np.arange(n + 1) / n, "quality": quality, "cost_share": cost / c_s.sum()}


def summarize(curve: dict[str, np.ndarray], q_weak: float, q_strong: float, at_cost: float = 0.5) -> dict[str, float]:
    """APGR, CPT50/CPT80 (as % strong calls and as cost share), quality share of best at ``at_cost`` cost share."""
    f, q, c = curve["frac_strong"], curve["quality"], curve["cost_share"]
    pgr = (q - q_weak) / (q_strong - q_weak)
    out: dict[str, float] = {
        "apgr": float(np.trapezoid(pgr, f)),
        # the same area over the cost-share axis (from the cheap model's cost to 1), normalised to [0, 1]-ish
        "apgr_cost": float(np.trapezoid(pgr, c) / max(float(c[-1] - c[0]), 1e-12)),
    }
    for x in (0.5, 0.8):
        hit = np.flatnonzero(pgr >= x)
        k = int(hit[0]) if hit.size else len(f) - 1
        out[f"cpt{int(x * 100)}_calls"] = float(f[k])
        out[f"cpt{int(x * 100)}_cost"] = float(c[k])
    k = int(np.flatnonzero(c <= at_cost + 1e-12)[-1])
    out["quality_share_at_cost"] = float(q[k] / q_strong)
    out["frac_strong_at_cost"] = float(f[k])
    out["at_cost"] = at_cost
    return out


def random_curve(
    q_w: np.ndarray, q_s: np.ndarray, c_w: np.ndarray, c_s: np.ndarray, rng: np.random.Generator, reps: int = 50
) -> dict[str, np.ndarray]:
    """Mean sweep over ``reps`` random orders (the random router)."""
    curves = [sweep(rng.random(len(q_w)), q_w, q_s, c_w, c_s) for _ in range(reps)]
    return {k: np.mean([c[k] for c in curves], axis=0) for k in curves[0]}


def knn_scores(train_x: np.ndarray, train_gain: np.ndarray, test_x: np.ndarray, k: int = 25) -> np.ndarray:
    """Mean strong-minus-weak quality of the ``k`` most cosine-similar training prompts."""
    out = np.empty(len(test_x))
    for start in range(0, len(test_x), 1024):
        sims = test_x[start : start + 1024] @ train_x.T
        idx = np.argpartition(-sims, k, axis=1)[:, :k]
        out[start : start + 1024] = train_gain[idx].mean(axis=1)
    return out


def knn_bandit_scores(
    train_x: np.ndarray, arms: np.ndarray, rewards: np.ndarray, test_x: np.ndarray, strong: int, weak: int, k: int = 25
) -> np.ndarray:
    """The kNN baseline with the router's information only: mean reward of the ``k`` most cosine-similar prompts on
    which the router chose the strong model, minus the same for the weak one (bandit feedback, one outcome each)."""
    out = np.zeros(len(test_x))
    unit = train_x / np.maximum(np.linalg.norm(train_x, axis=1, keepdims=True), 1e-12)
    for arm, sign in ((strong, 1.0), (weak, -1.0)):
        sel = arms == arm
        out += sign * knn_scores(unit[sel], rewards[sel], test_x, min(k, int(sel.sum()) - 1))
    return out
