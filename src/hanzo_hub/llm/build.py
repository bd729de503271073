"""Building the gateway from settings: deployments with keys from the vault, ledger, limits and the request log."""

from __future__ import annotations

from pathlib import Path

from hanzo_hub.config.llm import LlmSettings
from hanzo_hub.errors import ConfigError
from hanzo_hub.llm.gateway import Gateway, RouteFn
from hanzo_hub.llm.providers import PROVIDERS, Deployment
from hanzo_hub.llm.ratelimit import RateLimiter
from hanzo_hub.llm.registry import load_registry
from hanzo_hub.llm.request_log import RequestLog
from hanzo_hub.llm.retry import RetryPolicy
from hanzo_hub.llm.usage import UsageLedger
from hanzo_hub.sandbox.vault import Vault

__all__ = ["build_gateway", "deployments"]


def deployments(settings: LlmSettings, vault: Vault | None) -> dict[str, Deployment]:
    """Each configured provider as a :class:`Deployment`, its API key read from the vault.

    Raises:
        ConfigError: an API family is unknown, or a provider names a secret the vault lacks.
    """
    out: dict[str, Deployment] = {}
    for name, spec in settings.providers.items():
        if spec.api not in PROVIDERS:
            raise ConfigError(f"llm.providers.{name}.api: unknown API family '{spec.api}'")
        key = None
        if spec.api_key_secret is not None:
            key = vault.get(spec.api_key_secret) if vault is not None else None
            if key is None:
                raise ConfigError(
                    f"llm.providers.{name}.api_key_secret: the vault has no secret '{spec.api_key_secret}' "
                    f"(add it with: hanzo-hub secrets set {spec.api_key_secret})"
                )
        timeout = spec.timeout or settings.timeout
        out[name] = Deployment(name, spec.api, spec.base_url, key, dict(spec.headers), timeout)
    return out


def build_gateway(
    settings: LlmSettings, *, home: Path, vault: Vault | None = None, route: RouteFn | None = None
) -> Gateway | None:
    """The gateway for ``settings`` (state under ``home``: ``llm/usage.jsonl``, ``logs/llm.jsonl``), or ``None``
    when no provider is configured.

    Raises:
        ConfigError: a provider, key or model entry is invalid.
    """
    if not settings.providers:
        return None
    registry = load_registry(settings.models)
    deps = deployments(settings, vault)
    secrets = dict(vault.values()) if vault is not None else {}
    secrets.update({f"llm.providers.{d.name}": d.api_key for d in deps.values() if d.api_key})
    for model in settings.route_models:
        registry[model]  # raises ModelNotFound (a CompletionError) for an unknown id
    retry = RetryPolicy(
        retries=settings.retries,
        backoff_base=settings.backoff_base,
        backoff_max=settings.backoff_max,
        max_retry_after=settings.max_retry_after,
        cooldown=settings.cooldown,
    )
    return Gateway(
        registry,
        deps,
        route=route,
        route_models=settings.route_models,
        fallbacks=settings.fallbacks,
        retry=retry,
        ledger=UsageLedger(home / "llm", settings.budgets),
        limiter=RateLimiter(settings.rate_limits),
        log=RequestLog(home / "logs", secrets, log_prompts=settings.log_prompts),
    )
