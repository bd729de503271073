"""Markdown rendering of bench/results/routing.json."""

from __future__ import annotations

from typing import Any

ROUTERS = (
    "bandit",
    "cascade",
    "bandit (gain only)",
    "knn",
    "knn (gain only)",
    "knn, bandit feedback",
    "full-info model",
    "random",
    "oracle",
)


def _f(x: float) -> str:
    return f"{x:.3f}"


def markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Routing replay: GPT-4-1106 (strong) vs Mixtral-8x7B (weak), RouteLLM data",
        "",
        f"Features: {r.get('features', 'minilm')}. Mode: {r.get('mode', 'held-out')}. Seed {r['seed']}. Held-out = "
        "the 50% of each set the router never saw (in tune mode: a 30% slice of the learning half). Quality share = "
        "quality / always-best quality; cost share = cost / always-best cost.",
        "",
        "## Held-out results",
        "",
        "| set | router | APGR (calls / cost axis) | CPT50 calls / cost | CPT80 calls / cost | "
        "quality share @50% cost | strong calls @50% cost | target (>=0.95 @<=50%) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, h in r["held_out"].items():
        for router in (x for x in ROUTERS if x in h):
            m = h[router]
            ok = "yes" if m["quality_share_at_cost"] >= 0.95 else "no"
            if router.startswith("full-info"):
                ok = "(reference)"
            lines.append(
                f"| {name} | {router} | {_f(m['apgr'])} / {_f(m.get('apgr_cost', float('nan')))} | "
                f"{_f(m['cpt50_calls'])} / {_f(m['cpt50_cost'])} | "
                f"{_f(m['cpt80_calls'])} / {_f(m['cpt80_cost'])} | {_f(m['quality_share_at_cost'])} | "
                f"{_f(m['frac_strong_at_cost'])} | {ok if router != 'oracle' else '(ceiling)'} |"
            )
        ch = h["always_cheapest"]
        lines.append(
            f"| {name} | always-cheapest | - | - | - | {_f(ch['quality_share'])} (cost {_f(ch['cost_share'])})"
            " | 0 | - |"
        )
        lines.append(f"| {name} | always-best | - | - | - | 1.000 (cost 1.000) | 1 | - |")
    lines += [
        "",
        "Operating point of the router on held-out prompts (frozen model, final pacer lambda):",
        "",
        "| set | lambda | strong calls | quality share | cost share |",
        "|---|---|---|---|---|",
    ]
    for name, h in r["held_out"].items():
        op = h["bandit_operating_point"]
        lines.append(
            f"| {name} | {_f(op['lam'])} | {_f(op['frac_strong'])} | {_f(op['quality_share'])} | "
            f"{_f(op['cost_share'])} |"
        )
    if "cascade_online" in r:
        co = r["cascade_online"]
        lines += [
            "",
            "## Cascade (the deployed router: math prompts weak-first, the rest routed directly)",
            "",
            "Held-out rows are labelled 'cascade' above. Per set: share of held-out prompts cascaded, and what the "
            "frozen router and escalator do with the final pacer lambda "
            f"({_f(co['final_lam'] or 0.0)}); during learning, the share cascaded and escalated:",
            "",
            "| set | cascaded (held-out) | up share | quality share | cost share | learning: cascaded / escalated "
            "| learning: quality / cost share |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, h in r["held_out"].items():
            c, lr = h["cascade"], co["learning"][name]
            op = c["operating_point"]
            lines.append(
                f"| {name} | {_f(c['cascaded_share'])} | {_f(op['up_share'])} | {_f(op['quality_share'])} | "
                f"{_f(op['cost_share'])} | {_f(lr['cascaded_share'])} / {_f(lr['escalation_rate'])} | "
                f"{_f(lr['quality_share'])} / {_f(lr['cost_share'])} |"
            )
        lines.append(
            f"\nEscalation decision (checks + escalator): p50 {co['decide_ms']['p50']:.3f} ms, "
            f"p95 {co['decide_ms']['p95']:.3f} ms (n={co['decide_ms']['n']})."
        )
    on = r["online"]
    lines += [
        "",
        f"## Online learning curve (pooled stream halves, bandit feedback, pacer target {r['target_cost_share']})",
        "",
        "| window | strong calls | " + " | ".join(f"{n} quality / cost share" for n in r["held_out"]) + " |",
        "|---|---|" + "---|" * len(r["held_out"]),
    ]
    for w in on["learning_curve"]:
        cells = [f"{_f(w[n]['quality_share'])} / {_f(w[n]['cost_share'])}" if n in w else "-" for n in r["held_out"]]
        lines.append(f"| {w['window']} | {_f(w['frac_strong'])} | " + " | ".join(cells) + " |")
    o = r["overhead_ms_p50"]
    lines += [
        "",
        "## Overhead per request",
        "",
        f"- classifier + bandit (route): p50 {on['route_ms']['p50']:.3f} ms, p95 {on['route_ms']['p95']:.3f} ms",
        f"- feedback incl. periodic training: p50 {on['feedback_ms']['p50']:.3f} ms, "
        f"p95 {on['feedback_ms']['p95']:.3f} ms",
        (
            f"- MiniLM single-query embedding as the router ships it (ONNX Runtime, fp32): p50 "
            f"{r['embed_ms_single_query']['p50']:.1f} ms, p95 {r['embed_ms_single_query']['p95']:.1f} ms; through "
            f"SentenceTransformer.encode in the same run: p50 {r['embed_ms_single_query'].get('encode_p50', 0):.1f} "
            f"ms, p95 {r['embed_ms_single_query'].get('encode_p95', 0):.1f} ms (n={r['embed_ms_single_query']['n']})"
            if r["embed_ms_single_query"]["n"]
            else "- MiniLM embedding not measured in this run (hash features); docs/benchmarks.md: 12.8 ms p50"
        ),
        f"- total p50 including embedding: {o['with_embedding']:.1f} ms (excluding: {o['classifier_bandit']:.3f} ms)",
        "",
        "Category mix on held-out prompts (prototype classifier): "
        + "; ".join(
            f"{n}: " + ", ".join(f"{c} {v:.2f}" for c, v in h["categories"].items()) for n, h in r["held_out"].items()
        ),
        "",
    ]
    lines += [
        "## How to read this (honesty notes)",
        "",
        "- The bandit learns only from the learning halves, with bandit feedback (the chosen model's quality and "
        "answer length): one outcome per learning prompt. The kNN baseline is fit on the same halves with both "
        "models' outcomes (the exact strong-minus-weak gain of every learning prompt), i.e. twice the labels and "
        "the gain itself rather than two separately estimated means; so does the 'full-info model' row (the "
        "bandit's reward model fed both outcomes: a reference, not a router). 'knn, bandit feedback' is the same "
        "k=25 cosine kNN given only what the router saw (its replay buffer: the chosen model's outcome per prompt; "
        "mean over the 25 nearest strong-model outcomes minus the 25 nearest weak-model ones): the equal-information "
        "version of the baseline, shown next to it, not instead of it.",
        "- Nothing was tuned on the held-out halves: settings were chosen with `--tune` runs (validation = 30% of "
        "the learning halves, results in `routing-tune*.md`), the pacer target (0.45) was fixed before the first run.",
        "- 'bandit' and 'knn' rank prompts by predicted gain / expected extra cost, which is what the router's rule "
        "`gain > lam * extra_cost / scale` does as lam varies; the expected cost uses the answer lengths the router "
        "learned from feedback (the same estimate for both). '(gain only)' rows rank by predicted gain alone, as in "
        "RouteLLM. The oracle ranks by true gain / true extra cost (a ceiling).",
        "- APGR is the area under PGR over the share of strong calls (RouteLLM's definition); the cost-axis value "
        "integrates over cost share instead. 'quality share @50% cost' takes the last sweep point whose cost share "
        "is <= 0.5. The operating-point table is what the router itself does with its final lambda.",
        "- 'cascade' is the deployed configuration (`llm.cascade.categories = [math]`) in a second, independent pass "
        "over the same stream: math prompts are answered by Mixtral first and the escalator (bandit feedback only) "
        "reads that answer's checks (`llm/answer_check.py`) to keep it or pay for GPT-4 as well; a cascaded prompt "
        "sent up costs both calls. MMLU's data has no answer texts, so its math prompts are routed directly. The "
        "checks were designed while looking at their cross-validated AUC over all of GSM8K (both halves); no weight "
        "or threshold is fit on a held-out half, the escalator learns online from the learning halves only.",
        "- Oracle APGR exceeds 1 because Mixtral is right on some prompts where GPT-4 is wrong.",
        "- MT-Bench has 144 (question, turn) items, so its held-out half is 72 prompts: one prompt moves the "
        "quality share by up to ~0.5 points and the tune slice is 22 prompts; read its rows as noisy.",
        "- Token counts are characters/4; MMLU answers count as 2 output tokens; MT-Bench turn-2 input adds the "
        "strong model's turn-1 answer length. Prices: registry list prices (GPT-4-1106 $10/$30, Mixtral $0.6/$0.6 "
        "per M tokens). Contaminated prompts listed with the data are dropped.",
        "",
    ]
    return "\n".join(lines)
