"""Settings of routed completion (section ``llm``): providers, extra models, routing, retries, budgets.

Owned by the gateway (``hanzo_hub.llm``); the MCP surface reads ``enabled`` and ``sampling``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import Field

from hanzo_hub.config._base import _Model

__all__ = [
    "BudgetSettings",
    "BudgetSpec",
    "CascadeSettings",
    "LlmSettings",
    "ProviderSpec",
    "RateLimitSettings",
    "RateLimitSpec",
    "RouterSettings",
]

QueryCategory = Literal[
    "code", "math", "creative", "factual_qa", "multimodal", "summarization", "translation", "tool_use"
]


class ProviderSpec(_Model):
    """One provider deployment: an API family at a base URL, its key taken from the vault by name."""

    api: Literal["openai_compat", "anthropic"] = Field(description="API family: a key of llm.providers.PROVIDERS.")
    base_url: str = Field(description="e.g. https://api.example.com/v1 (OpenAI-compatible) or .../ (Anthropic).")
    api_key_secret: str | None = Field(default=None, description="Vault secret holding the API key.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers (no secrets).")
    timeout: float | None = Field(default=None, gt=0, description="Seconds for one attempt; default llm.timeout.")


class BudgetSpec(_Model):
    """Spending limits in USD; ``None`` is no limit. Days and months are UTC calendar periods."""

    daily: Decimal | None = Field(default=None, ge=0)
    monthly: Decimal | None = Field(default=None, ge=0)
    total: Decimal | None = Field(default=None, ge=0)


class BudgetSettings(_Model):
    """Budgets per user and per project; a request must fit every budget that applies to it."""

    users: dict[str, BudgetSpec] = Field(default_factory=dict, description="User id -> budget.")
    projects: dict[str, BudgetSpec] = Field(default_factory=dict, description="Project id -> budget.")
    default_user: BudgetSpec = Field(default_factory=BudgetSpec, description="For users not listed.")
    default_project: BudgetSpec = Field(default_factory=BudgetSpec, description="For projects not listed.")


class RateLimitSpec(_Model):
    """A token bucket per user: ``*_per_minute`` is the refill rate and the burst; ``None`` is no limit."""

    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0, description="Prompt plus max_tokens, estimated.")


class RateLimitSettings(_Model):
    users: dict[str, RateLimitSpec] = Field(default_factory=dict, description="User id -> limit.")
    default: RateLimitSpec = Field(default_factory=RateLimitSpec, description="For users not listed.")


def _math_only() -> list[QueryCategory]:
    return ["math"]


class CascadeSettings(_Model):
    """Cheap model first for some query categories; the answer's checks decide whether the best model answers too."""

    categories: list[QueryCategory] = Field(
        default_factory=_math_only,
        description="Routed requests of these categories go to the cheapest eligible model first; a learned "
        "escalator reads that answer's checks (arithmetic, final answer, unused numbers, hedges) and keeps it or "
        "asks the best model. [] turns the cascade off.",
    )


class RouterSettings(_Model):
    """How the router prices a dollar under the ``balanced`` policy, and which implicit signals it learns from."""

    target_cost_share: float | None = Field(
        default=0.45,
        gt=0,
        le=1,
        description="Balanced routing spends about this share of what always asking the dearest eligible model "
        "would cost: a pacer raises the price of a dollar while spend runs above it and lowers it below. null: a "
        "fixed price (the policy's default). quality_first, cost_first and an explicit lam are never paced.",
    )
    pacer_step: float = Field(
        default=0.02, gt=0, le=1, description="How fast the pacer's price moves per routed request."
    )
    regeneration_window: float = Field(
        default=300.0,
        ge=0,
        description="Seconds within which a user sending the same request again (the same messages to 'complete' "
        "or /v1/chat/completions, the same message and history to 'chat') rates the earlier, unrated answer 0 "
        "('regenerated') for the router. 0: only explicit ratings.",
    )


class LlmSettings(_Model):
    """Routed completion. Off until at least one provider is configured (or the client can sample)."""

    enabled: bool = Field(default=True, description="Serve the 'llm' tools (complete, chat, feedback).")
    providers: dict[str, ProviderSpec] = Field(
        default_factory=dict, description="Provider name (the registry's 'provider') -> deployment."
    )
    models: list[dict[str, Any]] = Field(
        default_factory=list, description="Registry entries added to (or replacing) the packaged models."
    )
    route_models: list[str] = Field(
        default_factory=list, description="Models the router chooses among; default: every model of a provider here."
    )
    sampling: Literal["client", "router", "client_then_router"] = Field(
        default="client_then_router",
        description="Who answers a downstream server's sampling request: the client, the hub's router, or the "
        "client when it can and the router otherwise.",
    )
    fallbacks: dict[str, list[str]] = Field(
        default_factory=dict, description="Model id -> models to fail over to, in order, when it cannot answer."
    )
    timeout: float = Field(default=60.0, gt=0, description="Seconds for one provider attempt (per provider: timeout).")
    retries: int = Field(default=2, ge=0, le=10, description="Retries per deployment after the first attempt.")
    backoff_base: float = Field(default=0.5, ge=0, description="Seconds before the first retry; doubles each retry.")
    backoff_max: float = Field(default=8.0, ge=0, description="Longest wait between retries (before jitter).")
    max_retry_after: float = Field(
        default=30.0,
        ge=0,
        description="A longer Retry-After is not waited out: the deployment cools down and the next candidate answers.",
    )
    cooldown: float = Field(
        default=30.0, ge=0, description="Seconds a deployment is skipped after it used up its retries."
    )
    cascade: CascadeSettings = Field(default_factory=CascadeSettings)
    router: RouterSettings = Field(default_factory=RouterSettings)
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)
    rate_limits: RateLimitSettings = Field(default_factory=RateLimitSettings)
    log_prompts: bool = Field(default=False, description="Write prompt and answer text into logs/llm.jsonl.")
