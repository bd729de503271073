"""The usage ledger, budgets, rate limits, retry policy, token counting and building the gateway from settings."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from hanzo_hub.config import HubSettings
from hanzo_hub.config.llm import BudgetSettings, BudgetSpec, LlmSettings, RateLimitSettings, RateLimitSpec
from hanzo_hub.errors import BudgetExceeded, ConfigError, RateLimited
from hanzo_hub.llm.build import build_gateway
from hanzo_hub.llm.ratelimit import RateLimiter
from hanzo_hub.llm.registry import load_registry
from hanzo_hub.llm.retry import Cooldowns, RetryPolicy
from hanzo_hub.llm.tokens import MESSAGE_OVERHEAD, PROMPT_OVERHEAD, BpeCounter, count_prompt
from hanzo_hub.llm.types import Caller, ChatMessage, Usage
from hanzo_hub.llm.usage import UsageLedger, UsageRecord, cost_of, usd
from hanzo_hub.sandbox.vault import Vault
from tests.llm.gateway_kit import MODELS, ask
from tests.llm.providers_server import ProviderServer

ALICE = Caller(user="alice", project="apollo")


def record(
    cost: str,
    *,
    user: str = "alice",
    project: str | None = "apollo",
    ts: str = "2026-12-01T10:00:00+00:00",
    tokens: tuple[int, int] = (10, 5),
) -> UsageRecord:
    return UsageRecord(
        ts=ts,
        request_id="r",
        user=user,
        project=project,
        model="m-a",
        provider="pa",
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cost_usd=Decimal(cost),
    )


def test_cost_is_exact_to_the_micro_dollar() -> None:
    mini = load_registry()["gpt-4o-mini"]  # $0.15 in, $0.60 out per million
    assert cost_of(mini, Usage(input_tokens=1_000_000, output_tokens=0)) == Decimal("0.15")
    assert cost_of(mini, Usage(input_tokens=7, output_tokens=3)) == Decimal("0.00000285")
    assert cost_of(MODELS[0], Usage(input_tokens=1234, output_tokens=567)) == Decimal("0.008755")
    assert sum(cost_of(mini, Usage(input_tokens=1, output_tokens=1)) for _ in range(1000)) == Decimal("0.00075")
    assert usd(Decimal("4.5E-7")) == "0.00000045"


async def test_ledger_survives_a_restart(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path)
    now = datetime.now(UTC).isoformat()
    await ledger.record(record("0.10", ts=now))
    await ledger.record(record("0.05", user="bob", ts=now))
    await ledger.record(record("0.01", project=None, ts=now))
    again = UsageLedger(tmp_path)
    assert again.spent("user:alice") == Decimal("0.11")
    assert again.spent("project:apollo") == Decimal("0.15")
    assert again.spent("user:bob", "day") == Decimal("0.05")
    totals = again.totals("user:alice", "month")
    assert (totals.requests, totals.input_tokens, totals.output_tokens) == (2, 20, 10)


def test_ledger_skips_an_unreadable_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "usage.jsonl").write_text(record("0.5").to_json() + "\n{torn\n")
    ledger = UsageLedger(tmp_path)
    assert ledger.spent("user:alice") == Decimal("0.5")
    assert "line 2" in caplog.text


async def test_daily_budget_resets_the_next_utc_day_but_monthly_keeps_counting(tmp_path: Path) -> None:
    today = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    clock = [today]
    budgets = BudgetSettings(default_user=BudgetSpec(daily=Decimal("1"), monthly=Decimal("1.5")))
    ledger = UsageLedger(tmp_path, budgets, now=lambda: clock[0])
    await ledger.record(record("0.9", ts=today.isoformat()))
    with pytest.raises(BudgetExceeded) as caught:
        ledger.reserve(ALICE, Decimal("0.2"))
    assert (caught.value.period, caught.value.limit, caught.value.spent) == ("day", "1", "0.9")
    clock[0] = today + timedelta(hours=2)
    ledger.reserve(ALICE, Decimal("0.2")).release()
    with pytest.raises(BudgetExceeded) as caught:
        ledger.reserve(ALICE, Decimal("0.7"))
    assert caught.value.period == "month"


def test_reservations_in_flight_count_against_the_budget(tmp_path: Path) -> None:
    ledger = UsageLedger(None, BudgetSettings(projects={"apollo": BudgetSpec(total=Decimal("1"))}))
    first = ledger.reserve(ALICE, Decimal("0.6"))
    with pytest.raises(BudgetExceeded) as caught:
        ledger.reserve(Caller(user="bob", project="apollo"), Decimal("0.6"))
    assert caught.value.scope == "project:apollo"
    first.release()
    first.release()  # idempotent
    ledger.reserve(Caller(user="bob", project="apollo"), Decimal("0.6"))


async def test_recording_releases_the_reservation_and_counts_the_real_cost() -> None:
    ledger = UsageLedger(None, BudgetSettings(default_user=BudgetSpec(total=Decimal("1"))))
    held = ledger.reserve(ALICE, Decimal("0.9"))
    await ledger.record(record("0.2", ts=datetime.now(UTC).isoformat()), held)
    ledger.reserve(ALICE, Decimal("0.8"))
    with pytest.raises(BudgetExceeded):
        ledger.reserve(ALICE, Decimal("0.01"))


def test_token_bucket_limits_requests_and_tokens() -> None:
    now = [0.0]
    settings = RateLimitSettings(default=RateLimitSpec(requests_per_minute=60, tokens_per_minute=600))
    limiter = RateLimiter(settings, clock=lambda: now[0])
    limiter.acquire("u", 500)
    with pytest.raises(RateLimited) as caught:
        limiter.acquire("u", 200)
    assert caught.value.what == "tokens"
    assert caught.value.retry_after == pytest.approx(10)  # 100 tokens short at 10 tokens/s
    now[0] = 10
    limiter.acquire("u", 200)
    for _ in range(59):
        limiter.acquire("v", 1)
    limiter.acquire("v", 1)
    with pytest.raises(RateLimited) as caught:
        limiter.acquire("v", 1)
    assert caught.value.what == "requests"


def test_backoff_doubles_with_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_max=4.0, max_retry_after=10)
    rng = random.Random(1)
    for retry, (low, high) in enumerate([(0.5, 1), (1, 2), (2, 4), (2, 4)]):
        waits = {policy.backoff(retry, rng) for _ in range(50)}
        assert all(low <= w <= high for w in waits)
        assert len(waits) > 1  # jittered
    assert policy.wait(0, 6.0, rng) == 6.0
    assert policy.wait(0, 11.0, rng) is None


def test_cooldowns_expire() -> None:
    now = [0.0]
    cooldowns = Cooldowns(lambda: now[0])
    cooldowns.cool("d", 10)
    cooldowns.cool("d", 2)  # a shorter one does not cut the running one short
    now[0] = 9
    assert cooldowns.remaining("d") == 1
    now[0] = 10
    assert cooldowns.remaining("d") == 0


def test_prompt_tokens_are_counted_with_the_bpe_tokenizer() -> None:
    counter = BpeCounter()
    assert counter.count("hello world") == 2
    messages = (ChatMessage(role="user", content="hello world"),)
    assert count_prompt(messages, counter=counter) == PROMPT_OVERHEAD + MESSAGE_OVERHEAD + 2


def test_selection_budget_uses_the_llm_counter() -> None:
    from hanzo_hub.llm import tokens
    from hanzo_hub.selection import budget

    assert budget.default_counter is tokens.default_counter
    assert budget.BpeCounter is tokens.BpeCounter


# ---- building from settings ----


def hub(tmp_path: Path, llm: dict[str, object]) -> HubSettings:
    return HubSettings(home=tmp_path, llm=LlmSettings.model_validate(llm))


def test_no_provider_means_no_gateway(tmp_path: Path) -> None:
    assert build_gateway(hub(tmp_path, {})) is None


async def test_built_gateway_reads_the_key_from_the_vault(provider_server: ProviderServer, tmp_path: Path) -> None:
    vault = Vault(tmp_path / "vault", keyring_service=None)
    vault.set("openai-key", "sk-from-the-vault-1")
    settings = hub(
        tmp_path,
        {
            "providers": {
                "openai": {
                    "api": "openai_compat",
                    "base_url": provider_server.openai_url("v"),
                    "api_key_secret": "openai-key",
                }
            },
            "models": [
                {
                    "id": "tiny",
                    "provider": "openai",
                    "api": "openai_compat",
                    "price_in": 1,
                    "price_out": 2,
                    "context_window": 4096,
                    "tier": "fast",
                }
            ],
            "route_models": ["tiny"],
            "retries": 0,
            "budgets": {"users": {"alice": {"total": "0.5"}}},
        },
    )
    gateway = build_gateway(settings, vault)
    assert gateway is not None
    async with gateway:
        result = await gateway.chat(ask(), caller=ALICE)
    assert result.model == "tiny"
    assert provider_server.requests("v")[0].headers["authorization"] == "Bearer sk-from-the-vault-1"
    assert (tmp_path / "llm" / "usage.jsonl").exists()
    log = (tmp_path / "logs" / "llm.jsonl").read_text()
    assert "sk-from-the-vault-1" not in log


def test_missing_vault_secret_is_a_config_error(tmp_path: Path) -> None:
    settings = hub(
        tmp_path, {"providers": {"x": {"api": "anthropic", "base_url": "http://127.0.0.1:1", "api_key_secret": "nope"}}}
    )
    with pytest.raises(ConfigError, match="nope"):
        build_gateway(settings, Vault(tmp_path / "vault", keyring_service=None))
