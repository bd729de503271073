"""Building the gateway from settings: deployments with keys from the vault, ledger, limits and the request log."""

from __future__ import annotations

from hanzo_hub.config import HubSettings
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


def build_gateway(settings: HubSettings, vault: Vault | None = None, *, route: RouteFn | None = None) -> Gateway | None:
    """The gateway for ``settings.llm``, or ``None`` when no provider is configured.

    State lives under the hub's home: the ledger in ``<home>/llm/usage.jsonl``, the request log in
    ``<home>/logs/llm.jsonl``. ``route`` chooses candidates for requests without a model (e.g. the learned router).

    Raises:
        ConfigError: a provider, key or model entry is invalid.
        ModelNotFound: ``llm.route_models`` names an unknown model.
    """
    llm = settings.llm
    if not llm.providers:
        return None
    registry = load_registry(llm.models)
    deps = deployments(llm, vault)
    secrets = dict(vault.values()) if vault is not None else {}
    secrets.update({f"llm.providers.{d.name}": d.api_key for d in deps.values() if d.api_key})
    for model in llm.route_models:
        registry[model]  # raises ModelNotFound (a CompletionError) for an unknown id
    retry = RetryPolicy(
        retries=llm.retries,
        backoff_base=llm.backoff_base,
        backoff_max=llm.backoff_max,
        max_retry_after=llm.max_retry_after,
        cooldown=llm.cooldown,
    )
    return Gateway(
        registry,
        deps,
        route=route,
        route_models=llm.route_models,
        fallbacks=llm.fallbacks,
        retry=retry,
        ledger=UsageLedger(settings.home / "llm", llm.budgets),
        limiter=RateLimiter(llm.rate_limits),
        log=RequestLog(settings.log_dir, secrets, log_prompts=llm.log_prompts),
    )
