"""Offline replay benchmark of the router on RouteLLM data (GPT-4-1106 = strong, Mixtral-8x7B = weak).

Protocol (fixed before looking at held-out results; see ``--tune`` for how the settings were chosen):
1. Each set (MMLU, GSM8K, MT-Bench) is split 50/50 by a seeded permutation into a learning half and a held-out half.
2. The router learns online over the pooled, shuffled learning halves with bandit feedback only (it sees the quality
   and answer length of the model it chose), a cost pacer targeting a 45% cost share. Learning curve: per 10% window.
3. Held-out: the frozen reward model's predicted strong-minus-weak quality, divided by the expected extra cost (the
   router's own decision rule ``gain > lam * extra_cost / scale``, swept over ``lam``), ranks the held-out prompts;
   threshold sweeps give quality-vs-cost curves, APGR, CPT50/CPT80 and quality share at 50% cost share. Baselines in
   the same run: always-best, always-cheapest, random (mean of 50 orders), embedding-kNN (k=25, fit on the learning
   halves with *both* models' outcomes, ranked by the same gain / expected-extra-cost rule, and by gain alone), the
   same reward model trained with full information (both outcomes; labelled, not the bandit) and the oracle.
``--tune`` replaces the held-out halves by a 30% validation slice of the learning halves (streaming over the other
70%): the only mode used to choose settings. ``--features hash`` uses hashed n-grams instead of MiniLM.
``--seed N`` repeats the whole protocol with another split, stream order and model seed (results ``-seedN``);
``bench/routing_seeds.py`` runs several seeds and reports their spread (seed 0 is the committed main run).
Run: ``python bench/routing.py`` (writes bench/results/routing[-tune|-hash].json and .md).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

import routing_cascade
from hanzo_hub.llm.bandit import BanditSettings, NeuralThompsonBandit
from hanzo_hub.llm.classify import CATEGORIES, PROTOTYPES, CategoryClassifier
from hanzo_hub.llm.registry import load_registry
from hanzo_hub.llm.router import CostPacer, Policy, Router, RouteRequest
from routing_data import STRONG, WEAK, ReplaySet, embed_cached, hash_embed, load_all
from routing_metrics import knn_bandit_scores, knn_scores, random_curve, summarize, sweep

RESULTS = Path(__file__).resolve().parent / "results"
SEED = 0
TARGET_COST_SHARE = 0.45
SETTINGS = BanditSettings(seed=SEED)


def _costs(s: ReplaySet, reg: object) -> dict[str, np.ndarray]:
    return {
        m: np.array([reg[m].cost(ti, to) for ti, to in zip(s.tokens_in, s.tokens_out[m], strict=True)])
        for m in (STRONG, WEAK)
    }  # type: ignore[index]


def _build_router(dim: int, proto_vecs: np.ndarray) -> Router:
    reg = load_registry().subset([WEAK, STRONG])
    texts = [t for c in PROTOTYPES for t in PROTOTYPES[c]]
    lookup = dict(zip(texts, proto_vecs, strict=True))
    clf = CategoryClassifier.from_prototypes(lambda ts: np.stack([lookup[t] for t in ts]))
    bandit = NeuralThompsonBandit(reg.ids(), dim + len(CATEGORIES), SETTINGS)
    return Router(reg, clf, bandit, CostPacer(TARGET_COST_SHARE))


def _window_rows(log: list[tuple[int, bool, float, float, float, float]], sets: list[ReplaySet]) -> list[dict]:
    windows = []
    n = len(log)
    for w in range(10):
        part = log[w * n // 10 : (w + 1) * n // 10]
        row: dict[str, object] = {"window": w + 1, "frac_strong": float(np.mean([p[1] for p in part]))}
        for si, s in enumerate(sets):
            ps = [p for p in part if p[0] == si]
            if ps:
                row[s.name] = {
                    "quality_share": sum(p[2] for p in ps) / sum(p[4] for p in ps),
                    "cost_share": sum(p[3] for p in ps) / sum(p[5] for p in ps),
                    "n": len(ps),
                }
        windows.append(row)
    return windows


def _online(
    router: Router,
    stream: list[tuple[int, int]],
    sets: list[ReplaySet],
    vecs: list[np.ndarray],
    costs: list[dict[str, np.ndarray]],
) -> dict[str, object]:
    route_ms, feedback_ms, log = [], [], []
    for si, i in stream:
        s = sets[si]
        req = RouteRequest(vecs[si][i], float(s.tokens_in[i]), policy=Policy(kind="balanced"))
        t0 = time.perf_counter()
        d = router.route(req)
        t1 = time.perf_counter()
        q = float(s.quality[d.model][i])
        router.feedback(d, q, float(s.tokens_out[d.model][i]))
        t2 = time.perf_counter()
        route_ms.append((t1 - t0) * 1e3)
        feedback_ms.append((t2 - t1) * 1e3)
        c = costs[si]
        log.append((si, d.model == STRONG, q, float(c[d.model][i]), float(s.quality[STRONG][i]), float(c[STRONG][i])))
    pct = lambda a, p: float(np.percentile(a, p))  # noqa: E731
    return {
        "learning_curve": _window_rows(log, sets),
        "final_lam": router.pacer.lam if router.pacer else None,
        "cost_scale": router.cost_scale,
        "route_ms": {"p50": pct(route_ms, 50), "p95": pct(route_ms, 95), "n": len(route_ms)},
        "feedback_ms": {"p50": pct(feedback_ms, 50), "p95": pct(feedback_ms, 95)},
    }


def _full_info(router: Router, stream: list[tuple[int, int]], sets: list[ReplaySet], vecs: list[np.ndarray]) -> Router:
    """The same reward model fed both models' outcomes for every stream prompt (a labelled upper reference)."""
    bandit = NeuralThompsonBandit(router.bandit.arms, router.bandit.dim, SETTINGS)
    for si, i in stream:
        x, _ = router.features(vecs[si][i])
        for arm, m in enumerate(bandit.arms):
            bandit.update(x, arm, float(sets[si].quality[m][i]), float(sets[si].tokens_out[m][i]))
    return Router(router.registry, router.classifier, bandit)


def _embed_latency(texts: list[str]) -> dict[str, float]:
    """Single-prompt embedding as the router ships it (``RoutePlanner`` embeds through the hub's embedder: ONNX
    Runtime, fp32) and through ``SentenceTransformer.encode`` (the reference), taking turns prompt by prompt."""
    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    shipped = SentenceTransformerEmbedder(
        runtime="onnx", cache_dir=Path(__file__).resolve().parent / ".cache/models", cache_recent=False
    )
    if shipped.runtime_in_use != "onnx":
        raise SystemExit("the ONNX query path did not load")
    runs = {"shipped": lambda t: shipped.embed_array_sync([t]), "encode": lambda t: shipped.encode_array_sync([t])}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for i, t in enumerate(texts):
        for name in list(runs) if i % 2 == 0 else list(reversed(runs)):
            t0 = time.perf_counter()
            runs[name](t)
            times[name].append((time.perf_counter() - t0) * 1e3)
    out = {"p50": float(np.percentile(times["shipped"], 50)), "p95": float(np.percentile(times["shipped"], 95))}
    out |= {
        "encode_p50": float(np.percentile(times["encode"], 50)),
        "encode_p95": float(np.percentile(times["encode"], 95)),
    }
    return out | {"n": len(texts)}


def _scores(router: Router, s: ReplaySet, vec: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predicted strong-minus-weak quality and expected extra cost of the strong model, per test prompt."""
    feats = np.stack([router.features(v)[0] for v in vec[test]])
    pred = router.bandit.quality(feats)
    si_, wi = router.bandit.arms.index(STRONG), router.bandit.arms.index(WEAK)
    extra = np.empty(len(test))
    for j, (x, i) in enumerate(zip(feats, test, strict=True)):
        c, _ = router.expected_costs(x, RouteRequest(vec[i], float(s.tokens_in[i])))
        extra[j] = max(float(c[si_] - c[wi]), 1e-12)
    return pred[:, si_] - pred[:, wi], extra


def _evaluate(
    router: Router,
    full: Router,
    s: ReplaySet,
    vec: np.ndarray,
    cost: dict[str, np.ndarray],
    test: np.ndarray,
    knn: tuple[np.ndarray, np.ndarray],
    rng: np.random.Generator,
) -> dict[str, object]:
    q_s, q_w = s.quality[STRONG][test], s.quality[WEAK][test]
    c_s, c_w = cost[STRONG][test], cost[WEAK][test]
    gain, extra = _scores(router, s, vec, test)
    full_gain, full_extra = _scores(full, s, vec, test)
    knn_gain = knn_scores(knn[0], knn[1], vec[test]) + rng.random(len(test)) * 1e-9
    b, dim = router.bandit.buffer, vec.shape[1]
    arms = router.bandit.arms
    knn_fb = knn_bandit_scores(
        b.x[: b.size, :dim], b.arm[: b.size], b.reward[: b.size], vec[test], arms.index(STRONG), arms.index(WEAK)
    )
    scorers = {
        "bandit": gain / extra,
        "bandit (gain only)": gain,
        "knn": knn_gain / extra,
        "knn (gain only)": knn_gain,
        "knn, bandit feedback": (knn_fb + rng.random(len(test)) * 1e-9) / extra,
        "full-info model": full_gain / full_extra,
        "oracle": ((q_s - q_w) + rng.random(len(test)) * 1e-9) / (c_s - c_w),
    }
    qs, qw = float(q_s.mean()), float(q_w.mean())
    out: dict[str, object] = {
        "n_test": len(test),
        "always_best": {"quality": qs, "cost_share": 1.0},
        "always_cheapest": {"quality": qw, "cost_share": float(c_w.sum() / c_s.sum()), "quality_share": qw / qs},
        "random": summarize(random_curve(q_w, q_s, c_w, c_s, rng), qw, qs),
    }
    for name, sc in scorers.items():
        curve = sweep(sc, q_w, q_s, c_w, c_s)
        summary = summarize(curve, qw, qs)
        idx = np.linspace(0, len(test), 11).astype(int)
        summary["curve"] = [
            {
                "frac_strong": float(curve["frac_strong"][i]),
                "cost_share": float(curve["cost_share"][i]),
                "quality_share": float(curve["quality"][i] / qs),
            }
            for i in idx
        ]
        out[name] = summary
    # the operating point the online router would take on held-out prompts: frozen mean, final pacer lam
    lam = router.pacer.lam if router.pacer else 0.1
    pick_strong = gain > lam * extra / (router.cost_scale or 1.0)
    out["bandit_operating_point"] = {
        "lam": lam,
        "frac_strong": float(pick_strong.mean()),
        "quality_share": float(np.where(pick_strong, q_s, q_w).mean() / qs),
        "cost_share": float(np.where(pick_strong, c_s, c_w).sum() / c_s.sum()),
    }
    cats = [router.classifier.categories[int(np.argmax(p))] for p in router.classifier.probabilities(vec[test])]
    out["categories"] = {c: cats.count(c) / len(cats) for c in sorted(set(cats))}
    return out


def _splits(sets: list[ReplaySet], rng: np.random.Generator, tune: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    splits = []
    for s in sets:
        perm = rng.permutation(len(s.texts))
        learn, held = perm[: len(perm) // 2], perm[len(perm) // 2 :]
        if tune:  # never look at the held-out half: validate on 30% of the learning half
            k = int(0.7 * len(learn))
            learn, held = learn[:k], learn[k:]
        splits.append((learn, held))
    return splits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embed-latency-samples", type=int, default=100)
    ap.add_argument("--features", choices=["minilm", "hash"], default="minilm")
    ap.add_argument("--tune", action="store_true", help="validate on a slice of the learning halves")
    ap.add_argument("--settings", default="{}", help="BanditSettings overrides as JSON (tune mode only)")
    ap.add_argument("--tag", default="", help="suffix of the result files")
    ap.add_argument("--sets", default="mmlu,gsm8k,mt_bench", help="comma-separated subset (tune mode only)")
    ap.add_argument("--seed", type=int, default=SEED, help="split, stream order and model seed (default 0)")
    args = ap.parse_args()
    global SETTINGS
    overrides = json.loads(args.settings)
    if overrides and not args.tune:
        raise SystemExit("--settings is for --tune runs: held-out runs use the committed defaults")
    SETTINGS = replace(SETTINGS, **{"seed": args.seed, **overrides})
    torch.set_num_threads(int(os.environ.get("HANZO_BENCH_THREADS", "1")))
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    sets = [s for s in load_all() if s.name in args.sets.split(",")]
    if len(sets) < 3 and not args.tune:
        raise SystemExit("--sets is for --tune runs: held-out runs use all three sets")
    embed = embed_cached if args.features == "minilm" else (lambda texts, _tag: hash_embed(texts))
    vecs = [embed(s.texts, s.name) for s in sets]
    proto = embed([t for c in PROTOTYPES for t in PROTOTYPES[c]], "prototypes")
    reg = load_registry()
    costs = [_costs(s, reg) for s in sets]
    splits = _splits(sets, rng, args.tune)
    stream = [(si, int(i)) for si, (tr, _) in enumerate(splits) for i in tr]
    stream = [stream[j] for j in rng.permutation(len(stream))]
    router = _build_router(vecs[0].shape[1], proto)
    t0 = time.perf_counter()
    online = _online(router, stream, sets, vecs, costs)
    online["wall_s"] = time.perf_counter() - t0
    full = _full_info(router, stream, sets, vecs)
    knn_x = np.concatenate([vecs[si][tr] for si, (tr, _) in enumerate(splits)])
    knn_gain = np.concatenate(
        [(s.quality[STRONG] - s.quality[WEAK])[tr] for s, (tr, _) in zip(sets, splits, strict=True)]
    )
    held = {
        s.name: _evaluate(router, full, s, vecs[si], costs[si], splits[si][1], (knn_x, knn_gain), rng)
        for si, s in enumerate(sets)
    }
    cascade = routing_cascade.build_cascade(_build_router(vecs[0].shape[1], proto), args.seed)
    cascade_online = routing_cascade.online(cascade, stream, sets, vecs, costs)
    for si, s in enumerate(sets):
        held[s.name]["cascade"] = routing_cascade.evaluate(cascade, s, vecs[si], costs[si], splits[si][1], _scores, rng)
    sample = [sets[0].texts[i] for i in splits[0][1][: args.embed_latency_samples]]
    embed_ms = (
        _embed_latency(sample) if args.features == "minilm" and not args.tune else {"p50": 0.0, "p95": 0.0, "n": 0}
    )
    result = {
        "features": args.features,
        "mode": "tune (validation slice of the learning halves)" if args.tune else "held-out",
        "protocol": __doc__,
        "seed": args.seed,
        "settings": asdict(SETTINGS),
        "target_cost_share": TARGET_COST_SHARE,
        "online": online,
        "cascade_online": cascade_online,
        "held_out": held,
        "embed_ms_single_query": embed_ms,
        "overhead_ms_p50": {
            "classifier_bandit": online["route_ms"]["p50"],
            "with_embedding": online["route_ms"]["p50"] + embed_ms["p50"],
        },
    }
    RESULTS.mkdir(exist_ok=True)
    suffix = ("-tune" if args.tune else "") + ("" if args.features == "minilm" else f"-{args.features}") + args.tag
    suffix += f"-seed{args.seed}" if args.seed != SEED else ""
    (RESULTS / f"routing{suffix}.json").write_text(json.dumps(result, indent=2))
    from routing_report import markdown

    (RESULTS / f"routing{suffix}.md").write_text(markdown(result))
    print((RESULTS / f"routing{suffix}.md").read_text())


if __name__ == "__main__":
    main()
