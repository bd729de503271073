"""Building gateways against the loopback provider server: test models with round prices, a fake clock and sleep."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from hanzo_hub.config.llm import BudgetSettings, RateLimitSettings
from hanzo_hub.llm.gateway import Gateway
from hanzo_hub.llm.providers import Deployment
from hanzo_hub.llm.ratelimit import RateLimiter
from hanzo_hub.llm.registry import ModelRegistry, ModelSpec
from hanzo_hub.llm.request_log import RequestLog
from hanzo_hub.llm.retry import RetryPolicy
from hanzo_hub.llm.types import Caller, ChatMessage, ChatRequest
from hanzo_hub.llm.usage import UsageLedger
from tests.llm.providers_server import ProviderServer

KEYS = {"pa": "sk-test-alpha-0001", "pb": "sk-test-beta-0002", "pc": "ak-test-gamma-0003"}

MODELS = [
    ModelSpec(
        id="m-a",
        provider="pa",
        api="openai_compat",
        price_in=2.5,
        price_out=10.0,
        context_window=8000,
        capabilities=frozenset({"tools"}),
        tier="best",
        upstream="upstream-a",
    ),
    ModelSpec(
        id="m-b",
        provider="pb",
        api="openai_compat",
        price_in=0.15,
        price_out=0.6,
        context_window=8000,
        capabilities=frozenset({"tools"}),
        tier="fast",
    ),
    ModelSpec(
        id="m-plain", provider="pb", api="openai_compat", price_in=0.1, price_out=0.1, context_window=8000, tier="fast"
    ),
    ModelSpec(
        id="c-a",
        provider="pc",
        api="anthropic",
        price_in=3.0,
        price_out=15.0,
        context_window=8000,
        capabilities=frozenset({"tools", "vision"}),
        tier="mid",
    ),
]

USER = Caller(user="alice", project="apollo")


@dataclass
class FakeTime:
    """A monotonic clock tests move by hand, and a sleep that records waits and only yields."""

    now: float = 1000.0
    waits: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        await anyio.lowlevel.checkpoint()


def deployments(server: ProviderServer, timeout: float = 5.0) -> dict[str, Deployment]:
    return {
        "pa": Deployment("pa", "openai_compat", server.openai_url("a"), KEYS["pa"], {}, timeout),
        "pb": Deployment("pb", "openai_compat", server.openai_url("b"), KEYS["pb"], {"x-extra": "1"}, timeout),
        "pc": Deployment("pc", "anthropic", server.anthropic_url("c"), KEYS["pc"], {}, timeout),
    }


def make_gateway(
    server: ProviderServer,
    home: Path,
    *,
    fake: FakeTime | None = None,
    retries: int = 2,
    cooldown: float = 30.0,
    max_retry_after: float = 5.0,
    timeout: float = 5.0,
    fallbacks: dict[str, Sequence[str]] | None = None,
    budgets: BudgetSettings | None = None,
    rate_limits: RateLimitSettings | None = None,
    log_prompts: bool = False,
    **extra: Any,
) -> Gateway:
    fake = fake or FakeTime()
    retry = RetryPolicy(
        retries=retries, backoff_base=0.04, backoff_max=1.0, max_retry_after=max_retry_after, cooldown=cooldown
    )
    return Gateway(
        ModelRegistry(MODELS),
        deployments(server, timeout),
        fallbacks=fallbacks or {},
        retry=retry,
        ledger=UsageLedger(home / "llm", budgets),
        limiter=RateLimiter(rate_limits or RateLimitSettings(), clock=fake),
        log=RequestLog(home / "logs", {f"key-{k}": v for k, v in KEYS.items()}, log_prompts=log_prompts),
        clock=fake,
        sleep=fake.sleep,
        rng=random.Random(7),
        **extra,
    )


def ask(text: str = "hi", **fields: Any) -> ChatRequest:
    return ChatRequest(messages=(ChatMessage(role="user", content=text),), **fields)
