"""The deployed router with its cascade, replayed: math prompts go to the cheap model first, then keep or escalate.

Protocol (the same stream, splits and pacer as the direct router in ``routing.py``, in a second, independent pass):
- A prompt whose classified category is in ``CASCADE_CATEGORIES`` (the default of ``llm.cascade.categories``) and
  whose set has answer texts (GSM8K, MT-Bench; the MMLU data has only correctness) is answered by the weak model;
  :class:`hanzo_hub.llm.escalation.LearnedCascade` reads the weak answer's checks and keeps it or escalates to the
  strong model. It pays the weak call always and the strong one when it escalates. The feedback is the quality of the
  answer given (bandit feedback: the weak answer's if kept, the strong one's if escalated).
- Every other prompt is routed directly by the same router, as in ``routing.py``.
- Held-out: cascaded prompts are ranked by the frozen escalator's predicted gain per expected extra dollar, the
  others by the router's, in one sweep; a cascaded prompt sent "up" costs weak + strong.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from hanzo_hub.llm.escalation import ESCALATION_SETTINGS, Escalator, LearnedCascade
from hanzo_hub.llm.router import Policy, Router, RouteRequest
from routing_data import STRONG, WEAK, ReplaySet
from routing_metrics import summarize

CASCADE_CATEGORIES = frozenset({"math"})


def build_cascade(router: Router, seed: int = 0) -> LearnedCascade:
    escalator = Escalator(len(router.classifier.categories), replace(ESCALATION_SETTINGS, seed=seed))
    return LearnedCascade(router, escalator, CASCADE_CATEGORIES)


def _cascaded(cascade: LearnedCascade, s: ReplaySet, category: str) -> bool:
    return s.answers is not None and cascade.applies(category)


def online(
    cascade: LearnedCascade,
    stream: list[tuple[int, int]],
    sets: list[ReplaySet],
    vecs: list[np.ndarray],
    costs: list[dict[str, np.ndarray]],
) -> dict[str, object]:
    """Learn over the stream; per set: share of prompts cascaded, escalation rate, quality and cost shares."""
    router = cascade.router
    stats = {s.name: {"n": 0, "cascaded": 0, "escalated": 0, "q": 0.0, "q_best": 0.0, "c": 0.0, "c_best": 0.0}
             for s in sets}  # fmt: skip
    decide_ms = []
    t0 = time.perf_counter()
    for si, i in stream:
        s, c = sets[si], costs[si]
        req = RouteRequest(vecs[si][i], float(s.tokens_in[i]), policy=Policy(kind="balanced"))
        st = stats[s.name]
        features = router.features(vecs[si][i])
        if _cascaded(cascade, s, features[1]):
            assert s.answers is not None
            t1 = time.perf_counter()
            d = cascade.decide(req, features, s.texts[i], WEAK, STRONG, s.answers[WEAK][i])
            decide_ms.append((time.perf_counter() - t1) * 1e3)
            q = float(s.quality[d.model][i])
            cascade.feedback(d, q, float(s.tokens_out[d.model][i]))
            spent = float(c[WEAK][i]) + (float(c[STRONG][i]) if d.escalation.escalate else 0.0)
            st["cascaded"] += 1
            st["escalated"] += int(d.escalation.escalate)
        else:
            r = router.route(req)
            q = float(s.quality[r.model][i])
            router.feedback(r, q, float(s.tokens_out[r.model][i]))
            spent = float(c[r.model][i])
        st["n"] += 1
        st["q"] += q
        st["q_best"] += float(s.quality[STRONG][i])
        st["c"] += spent
        st["c_best"] += float(c[STRONG][i])
    pct = lambda a, p: float(np.percentile(a, p)) if a else 0.0  # noqa: E731
    return {
        "wall_s": time.perf_counter() - t0,
        "final_lam": router.pacer.lam if router.pacer else None,
        "decide_ms": {"p50": pct(decide_ms, 50), "p95": pct(decide_ms, 95), "n": len(decide_ms)},
        "learning": {
            name: {
                "cascaded_share": st["cascaded"] / max(st["n"], 1),
                "escalation_rate": st["escalated"] / max(st["cascaded"], 1),
                "quality_share": st["q"] / max(st["q_best"], 1e-12),
                "cost_share": st["c"] / max(st["c_best"], 1e-12),
            }
            for name, st in stats.items()
        },
    }


def _mixed_sweep(
    score: np.ndarray, q_w: np.ndarray, q_s: np.ndarray, c_w: np.ndarray, c_up: np.ndarray, c_ref: np.ndarray
) -> dict[str, np.ndarray]:
    """Send the top-k by ``score`` up (cost ``c_up`` instead of ``c_w``), k = 0..n; cost share over ``c_ref``."""
    order = np.argsort(-score, kind="stable")
    n = len(score)
    quality = (q_w.sum() + np.concatenate([[0.0], np.cumsum((q_s - q_w)[order])])) / n
    cost = c_w.sum() + np.concatenate([[0.0], np.cumsum((c_up - c_w)[order])])
    return {"frac_strong": np.arange(n + 1) / n, "quality": quality, "cost_share": cost / c_ref.sum()}


def evaluate(
    cascade: LearnedCascade,
    s: ReplaySet,
    vec: np.ndarray,
    cost: dict[str, np.ndarray],
    test: np.ndarray,
    direct_scores: Callable[[Router, ReplaySet, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    rng: np.random.Generator,
) -> dict[str, object]:
    """Held-out sweep of the deployed router (cascade where it applies, the direct router elsewhere)."""
    router = cascade.router
    q_s, q_w = s.quality[STRONG][test], s.quality[WEAK][test]
    c_s, c_w = cost[STRONG][test], cost[WEAK][test]
    gain, extra = direct_scores(router, s, vec, test)
    features = [router.features(vec[i]) for i in test]
    cascaded = np.array([_cascaded(cascade, s, category) for _, category in features], bool)
    c_up = np.where(cascaded, c_w + c_s, c_s)
    if cascaded.any():
        assert s.answers is not None
        n_cat = len(router.classifier.categories)
        xe = np.stack(
            [
                cascade.escalator.features(s.texts[i], s.answers[WEAK][i], x[-n_cat:])
                for i, (x, _), on in zip(test, features, cascaded, strict=True)
                if on
            ]
        )
        gain[cascaded] = cascade.escalator.gain(xe)
    score = gain / extra + rng.random(len(test)) * 1e-9
    qs, qw = float(q_s.mean()), float(q_w.mean())
    summary: dict[str, object] = dict(summarize(_mixed_sweep(score, q_w, q_s, c_w, c_up, c_s), qw, qs))
    summary["cascaded_share"] = float(cascaded.mean())
    # what the deployed router does with its final lam (escalate / route up when gain > lam * extra / scale)
    lam, scale = (router.pacer.lam if router.pacer else 0.1), router.cost_scale or 1.0
    up = gain > lam * extra / scale
    summary["operating_point"] = {
        "lam": lam,
        "up_share": float(up.mean()),
        "quality_share": float(np.where(up, q_s, q_w).mean() / qs),
        "cost_share": float(np.where(up, c_up, c_w).sum() / c_s.sum()),
    }
    return summary
