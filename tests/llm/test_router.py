from __future__ import annotations

import zlib

import numpy as np
import pytest

pytest.importorskip("torch")

from hanzo_hub.errors import ConfigError, ModelNotFound, NoEligibleModel
from hanzo_hub.llm.bandit import BanditSettings, NeuralThompsonBandit
from hanzo_hub.llm.classify import CATEGORIES, PROTOTYPES, CategoryClassifier
from hanzo_hub.llm.registry import load_registry
from hanzo_hub.llm.router import CostPacer, Policy, Router, RouteRequest, RouterState

DIM = 64
MODELS = ["llama-3.1-8b-instant", "gpt-4o-mini", "gpt-4o"]


def _hash_embed(texts: list[str]) -> np.ndarray:
    out = []
    for t in texts:
        v = np.zeros(DIM, np.float32)
        for w in t.lower().split():
            v[zlib.crc32(w.encode()) % DIM] += 1.0
        out.append(v / max(np.linalg.norm(v), 1e-9))
    return np.stack(out)


def _router(**settings: object) -> Router:
    registry = load_registry().subset(MODELS)
    classifier = CategoryClassifier.from_prototypes(_hash_embed)
    bandit = NeuralThompsonBandit(
        registry.ids(), DIM + len(CATEGORIES), BanditSettings(hidden=16, warmup_per_arm=0, explore_floor=0.0)
    )
    return Router(registry, classifier, bandit, **settings)  # type: ignore[arg-type]


def _req(policy: Policy, **kw: object) -> RouteRequest:
    return RouteRequest(embedding=_hash_embed(["write a python function"])[0], tokens_in=500, policy=policy, **kw)  # type: ignore[arg-type]


def test_registry_user_entry_overrides_packaged_and_adds_new() -> None:
    reg = load_registry(
        [
            {
                "id": "gpt-4o",
                "provider": "openai",
                "api": "openai_compat",
                "price_in": 1.0,
                "price_out": 2.0,
                "context_window": 1000,
            },
            {
                "id": "local",
                "provider": "ollama",
                "api": "openai_compat",
                "price_in": 0,
                "price_out": 0,
                "context_window": 8192,
                "tier": "fast",
            },
        ]
    )
    assert reg["gpt-4o"].price_in == 1.0
    assert reg["local"].cost(1e6, 1e6) == 0.0
    assert reg["gpt-4-1106-preview"].cost(1e6, 1e6) == pytest.approx(40.0)
    with pytest.raises(ModelNotFound):
        reg["nope"]
    with pytest.raises(ConfigError):
        load_registry([{"id": "x"}])


def test_pinned_policy_returns_the_pinned_model() -> None:
    router = _router()
    d = router.route(_req(Policy(kind="pinned", model="gpt-4o")))
    assert d.model == "gpt-4o"
    assert d.reason == "pinned"
    with pytest.raises(NoEligibleModel):
        router.route(_req(Policy(kind="pinned", model="unknown")))


def test_cost_first_prefers_cheaper_models_than_quality_first_when_untrained() -> None:
    router = _router()
    cheap = [router.route(_req(Policy(kind="cost_first"))).model for _ in range(50)]
    assert cheap.count("llama-3.1-8b-instant") >= 45


def test_quality_first_follows_learned_quality() -> None:
    router = _router()
    # teach: quality rises with price (0.6, 0.7, 0.8)
    for _ in range(300):
        for arm, q in enumerate([0.6, 0.7, 0.8]):
            d = router.route(_req(Policy(kind="pinned", model=MODELS[arm])))
            router.feedback(d, q)
    picks = [router.route(_req(Policy(kind="quality_first"))).model for _ in range(30)]
    assert picks.count("gpt-4o") >= 25
    cheap = [router.route(_req(Policy(kind="cost_first"))).model for _ in range(30)]
    assert cheap.count("gpt-4o") <= 5


def test_limits_exclude_models_and_refuse_when_none_fit() -> None:
    router = _router()
    cost_4o = load_registry()["gpt-4o"].cost(500, 256)
    for _ in range(20):
        d = router.route(_req(Policy(kind="quality_first", max_cost=cost_4o / 2)))
        assert d.model != "gpt-4o"
        assert d.est_cost <= cost_4o / 2
    assert router.route(_req(Policy(max_latency_ms=400))).model == "llama-3.1-8b-instant"
    with pytest.raises(NoEligibleModel):
        router.route(_req(Policy(max_cost=0.0)))
    with pytest.raises(NoEligibleModel):
        router.route(_req(Policy(), needs=frozenset({"teleport"})))


def test_pacer_raises_lam_when_spending_above_target() -> None:
    pacer = CostPacer(target=0.2, lam=0.0)
    for _ in range(10):
        pacer.observe(1.0)
    assert pacer.lam > 0.1
    for _ in range(100):
        pacer.observe(0.0)
    assert pacer.lam == 0.0


def test_balanced_routing_is_paced_and_other_policies_leave_the_pacer_alone() -> None:
    router = _router(pacer=CostPacer(target=0.05, lam=0.0))
    # quality rises with price, so an unpaced router asks gpt-4o, far above a 5% cost share
    for _ in range(100):
        for arm, q in enumerate([0.6, 0.7, 0.8]):
            router.feedback(router.route(_req(Policy(kind="pinned", model=MODELS[arm]))), q)
    assert router.pacer is not None
    assert router.pacer.lam == 0.0  # pinned requests are not paced
    for _ in range(20):
        router.route(_req(Policy(kind="quality_first")))
        router.route(_req(Policy(lam=0.0)))
    assert router.pacer.lam == 0.0
    picks = [router.route(_req(Policy())).model for _ in range(200)]
    assert router.pacer.lam > 0.1  # balanced spend ran above 5%, so a dollar got dearer ...
    assert picks[-50:].count("gpt-4o") < picks[:50].count("gpt-4o")  # ... and the dear model is asked less
    assert router.lam(Policy()) == router.pacer.lam
    assert router.lam(Policy(kind="quality_first")) == 0.02


def test_router_state_round_trips_and_rejects_garbage() -> None:
    router = _router(pacer=CostPacer(target=0.45))
    router.route(_req(Policy()))
    assert router.pacer is not None
    router.pacer.lam = 0.37
    saved = router.state.to_json()
    assert saved == {"lam": 0.37, "cost_scale": router.cost_scale}
    fresh = _router(pacer=CostPacer(target=0.45))
    fresh.restore(RouterState.from_json(saved))
    assert (fresh.lam(Policy()), fresh.cost_scale) == (0.37, router.cost_scale)
    unpaced = _router()
    unpaced.restore(RouterState.from_json(saved))  # no pacer: the saved price is not used
    assert unpaced.lam(Policy()) == 0.1
    for bad in ([], {"lam": -1}, {"lam": "0.3"}, {"cost_scale": float("inf")}, {"lam": True}):
        with pytest.raises(ValueError, match="router state"):
            RouterState.from_json(bad)
    assert RouterState.from_json({}) == RouterState(None, None)


def test_classifier_picks_prototype_category() -> None:
    clf = CategoryClassifier.from_prototypes(_hash_embed)
    for cat, texts in PROTOTYPES.items():
        assert clf.classify(_hash_embed([texts[0]])[0]) == cat


async def test_aroute_runs_in_a_worker_thread() -> None:
    d = await _router().aroute(_req(Policy(kind="pinned", model="gpt-4o-mini")))
    assert d.model == "gpt-4o-mini"
