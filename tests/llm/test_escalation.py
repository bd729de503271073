"""The learned cascade step: the escalator must learn, from bandit feedback alone, which cheap answers to escalate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from hanzo_hub.llm.bandit import BanditSettings, NeuralThompsonBandit
from hanzo_hub.llm.classify import CATEGORIES, CategoryClassifier
from hanzo_hub.llm.escalation import ESCALATION_SETTINGS, Escalator, LearnedCascade
from hanzo_hub.llm.registry import load_registry
from hanzo_hub.llm.router import CostPacer, Policy, Router, RouteRequest
from tests.llm.test_router import DIM, _hash_embed

CHEAP, BEST = "llama-3.1-8b-instant", "gpt-4o"


def _question(rng: np.random.Generator) -> tuple[str, int, int]:
    a, b = int(rng.integers(2, 90)), int(rng.integers(2, 90))
    return f"A box holds {a} pens and another holds {b}. How many pens in all?", a, b


def _cheap_answer(a: int, b: int, wrong: bool) -> str:
    return f"{a} + {b} = {a + b + (1 if wrong else 0)}\n#### {a + b + (1 if wrong else 0)}"


def test_escalator_learns_to_escalate_exactly_the_answers_whose_checks_fail() -> None:
    """The cheap model is wrong on 30% of prompts and its wrong answers state wrong sums; the best one is always
    right. With bandit feedback only (the quality of the answer given), the escalator must end up escalating the
    failing answers and keeping the right ones."""
    rng = np.random.default_rng(0)
    esc = Escalator(len(CATEGORIES), ESCALATION_SETTINGS)
    probs = np.eye(len(CATEGORIES), dtype=np.float32)[CATEGORIES.index("math")]
    for _ in range(400):
        q, a, b = _question(rng)
        wrong = bool(rng.random() < 0.3)
        d = esc.decide(esc.features(q, _cheap_answer(a, b, wrong), probs), extra_cost=1.0, lam=0.3, cost_scale=1.0)
        esc.feedback(d, 1.0 if d.escalate or not wrong else 0.0)
    kept_right = escalated_wrong = 0
    for _ in range(100):
        q, a, b = _question(rng)
        kept_right += not esc.decide(esc.features(q, _cheap_answer(a, b, False), probs), 1.0, 0.3, 1.0).escalate
        escalated_wrong += esc.decide(esc.features(q, _cheap_answer(a, b, True), probs), 1.0, 0.3, 1.0).escalate
    assert kept_right >= 90, kept_right
    assert escalated_wrong >= 90, escalated_wrong


def test_a_dear_enough_best_model_is_not_worth_escalating_to() -> None:
    rng = np.random.default_rng(1)
    esc = Escalator(len(CATEGORIES), ESCALATION_SETTINGS)
    probs = np.zeros(len(CATEGORIES), np.float32)
    for _ in range(300):
        q, a, b = _question(rng)
        wrong = bool(rng.random() < 0.3)
        d = esc.decide(esc.features(q, _cheap_answer(a, b, wrong), probs), 1.0, 0.3, 1.0)
        esc.feedback(d, 1.0 if d.escalate or not wrong else 0.0)
    q, a, b = _question(rng)
    x = esc.features(q, _cheap_answer(a, b, True), probs)
    assert esc.gain(x[None, :])[0] > 0.5
    # at lam * extra / scale = 5, a gain below 1 never pays: even a wrong answer is kept
    assert sum(esc.decide(x, extra_cost=50.0, lam=0.1, cost_scale=1.0).escalate for _ in range(50)) <= 5


def test_escalator_round_trips_and_refuses_a_mismatched_save(tmp_path: Path) -> None:
    esc = Escalator(len(CATEGORIES))
    x = esc.features("2 + 2?", "2 + 2 = 5. #### 5", np.zeros(len(CATEGORIES), np.float32))
    for _ in range(30):
        esc.feedback(esc.decide(x, 1.0, 0.1, 1.0), 0.0)
    esc.save(tmp_path / "e.npz")
    loaded = Escalator.load(tmp_path / "e.npz", len(CATEGORIES))
    assert loaded.bandit.steps == 30
    assert loaded.gain(x[None, :]) == pytest.approx(esc.gain(x[None, :]))
    with pytest.raises(ValueError, match="does not fit"):
        Escalator.load(tmp_path / "e.npz", len(CATEGORIES) + 1)


def test_learned_cascade_prices_with_the_router_and_trains_both_models() -> None:
    registry = load_registry().subset([CHEAP, BEST])
    classifier = CategoryClassifier.from_prototypes(_hash_embed)
    settings = BanditSettings(hidden=16, warmup_per_arm=0, explore_floor=0.0)
    router = Router(registry, classifier, NeuralThompsonBandit(registry.ids(), DIM + len(CATEGORIES), settings),
                    CostPacer(0.4))  # fmt: skip
    cascade = LearnedCascade(router, Escalator(len(CATEGORIES)), frozenset({"math"}))
    req = RouteRequest(_hash_embed(["how many pens in all"])[0], 200.0, 100.0, policy=Policy())
    lam_before = router.pacer.lam if router.pacer else 0.0
    features = router.features(req.embedding)
    first = cascade.decide(req, features, "How many pens?", CHEAP, BEST, "3 + 4 = 8. #### 8")
    second = cascade.decide(req, features, "How many pens?", CHEAP, BEST, "3 + 4 = 8. #### 8")
    # warm-up: the escalator tries keeping, then escalating
    assert (first.escalation.escalate, first.model) == (False, CHEAP)
    assert (second.escalation.escalate, second.model) == (True, BEST)
    assert second.route.reason.startswith(f"cascade: escalated from {CHEAP}")
    assert second.extra_cost == pytest.approx(registry[BEST].cost(200.0, 100.0))
    assert router.cost_scale is not None
    assert router.pacer is not None
    assert router.pacer.lam != lam_before
    cascade.feedback(first, 0.0, 40.0)
    cascade.feedback(second, 1.0, 90.0)
    assert cascade.escalator.bandit.steps == 2
    assert router.bandit.steps == 2
    assert list(router.bandit.buffer.arm[:2]) == [registry.ids().index(CHEAP), registry.ids().index(BEST)]


def test_a_three_rung_ladder_escalates_step_by_step_and_a_rating_trains_every_rung() -> None:
    mid = "claude-3-5-haiku"
    registry = load_registry().subset([CHEAP, mid, BEST])
    assert [registry[m].tier for m in (CHEAP, mid, BEST)] == ["fast", "mid", "best"]
    classifier = CategoryClassifier.from_prototypes(_hash_embed)
    settings = BanditSettings(hidden=16, warmup_per_arm=0, explore_floor=0.0)
    router = Router(registry, classifier, NeuralThompsonBandit(registry.ids(), DIM + len(CATEGORIES), settings),
                    CostPacer(0.1, lam=0.0, step=1.0))  # fmt: skip
    cascade = LearnedCascade(router, Escalator(len(CATEGORIES)), frozenset({"math"}))
    req = RouteRequest(_hash_embed(["how many pens in all"])[0], 200.0, 100.0, policy=Policy())
    features = router.features(req.embedding)
    wrong = "3 + 4 = 8. #### 8"
    cascade.decide(req, features, "How many pens?", CHEAP, mid, wrong, final=False)  # warm-up: keep
    up = cascade.decide(req, features, "How many pens?", CHEAP, mid, wrong, final=False)  # warm-up: escalate
    assert up.model == mid
    assert len(cascade.escalators) == 1
    lam_after_first_rung = router.pacer.lam if router.pacer else 0.0
    assert lam_after_first_rung > 0.1  # the escalation to mid spent more than 10% of the best model's cost
    kept = cascade.decide(req, features, "How many pens?", mid, BEST, "3 + 4 = 7. #### 7", earlier=up)
    # rung 1 has its own, fresh escalator (its warm-up keeps first)
    assert len(cascade.escalators) == 2
    assert [rung for rung, _ in kept.steps] == [0, 1]
    assert [e.escalate for _, e in kept.steps] == [True, False]
    assert kept.model == mid
    assert kept.route.reason.startswith(f"cascade: escalated from {CHEAP} (")
    assert f", then kept {mid} (" in kept.route.reason
    assert kept.route.reason.count("category=") == 1
    costs, _ = router.expected_costs(features[0], req)
    assert kept.extra_cost == pytest.approx(float(costs[registry.ids().index(mid)]))
    # the second rung only adds what it spent (nothing: it kept), with no second reference cost
    assert router.pacer is not None
    assert router.pacer.lam == pytest.approx(lam_after_first_rung)
    cascade.feedback(kept, 1.0, 50.0)
    assert [e.bandit.steps for e in cascade.escalators] == [1, 1]
    assert router.bandit.steps == 1
    assert int(router.bandit.buffer.arm[0]) == registry.ids().index(mid)
