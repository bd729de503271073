"""Shared pieces of the llm-surface tests: a hub config routed to the loopback provider server.

Two models of one scripted OpenAI-compatible deployment ``p``: ``small`` (tier fast, $1/$2 per million tokens) and
``big`` (tier best, $10/$30). With the default ``balanced`` policy and an untrained router, ``small`` answers first.
"""

from __future__ import annotations

from typing import Any

from tests.llm.providers_server import ProviderServer

MODELS: list[dict[str, Any]] = [
    {"id": "small", "provider": "p", "api": "openai_compat", "price_in": 1.0, "price_out": 2.0,
     "context_window": 32000, "capabilities": ["tools"], "tier": "fast"},
    {"id": "big", "provider": "p", "api": "openai_compat", "price_in": 10.0, "price_out": 30.0,
     "context_window": 64000, "capabilities": ["tools"], "tier": "best"},
]  # fmt: skip


def llm_section(server: ProviderServer, **extra: Any) -> dict[str, Any]:
    """The ``llm`` settings section pointing at deployment ``p`` of ``server`` (fast retries for tests)."""
    return {
        "providers": {"p": {"api": "openai_compat", "base_url": server.openai_url("p"), "timeout": 5}},
        "models": MODELS,
        "route_models": ["small", "big"],
        "retries": 0,
        "cascade": {"categories": []},  # direct routing; tests/hub/test_llm_cascade.py turns the cascade on
        **extra,
    }


MEMORY = {"enabled": True, "embedder": "fake", "store": "memory"}
NO_MEMORY = {"embedder": "fake"}
"""Memory off, but the router's embedder (the shared one, ``memory.embedder``) is the fake one: no model loads."""
FAKE = {"embedder": "fake"}
"""Exposure settings whose tool search (used by ``chat`` to pick tools) embeds with the fake embedder."""
BACKENDS = {"call_timeout": 60.0}
"""The first routed call builds the router (imports torch): on a loaded machine that can pass the 10 s test bound."""
