"""Provider modules, one per API family, chosen through :data:`PROVIDERS` (API family -> import string)."""

from __future__ import annotations

import importlib
from typing import Any

import httpx2

from hanzo_hub.errors import ConfigError
from hanzo_hub.llm.providers.base import Deployment, Provider

__all__ = ["PROVIDERS", "Deployment", "Provider", "load_provider"]

PROVIDERS: dict[str, str] = {
    "anthropic": "hanzo_hub.llm.providers.anthropic:AnthropicProvider",
    "openai_compat": "hanzo_hub.llm.providers.openai_compat:OpenAICompatProvider",
}


def load_provider(api: str, http: httpx2.AsyncClient) -> Provider:
    """The provider for API family ``api``, sharing ``http``.

    Raises:
        ConfigError: no provider module serves ``api``.
    """
    try:
        target = PROVIDERS[api]
    except KeyError:
        raise ConfigError(f"llm: unknown provider API '{api}' (known: {', '.join(sorted(PROVIDERS))})") from None
    module, _, name = target.partition(":")
    cls: Any = getattr(importlib.import_module(module), name)
    provider: Provider = cls(http)
    return provider
