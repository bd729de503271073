"""Settings of routed completion (section ``llm``): providers, extra models, routing, retries, budgets.

Owned by the gateway (``hanzo_hub.llm``); the MCP surface reads ``enabled`` and ``sampling``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hanzo_hub.config._base import _Model

__all__ = ["LlmSettings", "ProviderSpec"]


class ProviderSpec(_Model):
    """One provider deployment: an API family at a base URL, its key taken from the vault by name."""

    api: Literal["openai_compat", "anthropic"] = Field(description="API family: a key of llm.providers.PROVIDERS.")
    base_url: str = Field(description="e.g. https://api.example.com/v1 (OpenAI-compatible) or .../ (Anthropic).")
    api_key_secret: str | None = Field(default=None, description="Vault secret holding the API key.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers (no secrets).")
    timeout: float = Field(default=60.0, gt=0, description="Seconds for one attempt.")


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
