"""The hub's gateway: built from settings with API keys from the vault, and reports read from its usage ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Any

import anyio

from hanzo_hub.config import HubSettings
from hanzo_hub.llm.build import build_gateway
from hanzo_hub.llm.gateway import Gateway, RouteFn
from hanzo_hub.llm.usage import UsageLedger, UsageRecord
from hanzo_hub.sandbox.vault import Vault

__all__ = ["open_gateway", "usage_report"]


def _vault(settings: HubSettings) -> Vault | None:
    if not any(p.api_key_secret for p in settings.llm.providers.values()):
        return None
    return Vault(settings.vault_dir, keyring_service=settings.sandbox.keyring_service)


@asynccontextmanager
async def open_gateway(settings: HubSettings, route: RouteFn) -> AsyncIterator[tuple[Gateway, UsageLedger | None]]:
    """The gateway for ``settings`` routed by ``route``, closed on exit.

    Raises:
        ConfigError: a provider, key or model entry is invalid.
        VaultError: a provider names a secret and the vault cannot be read.
    """
    vault = await anyio.to_thread.run_sync(_vault, settings)
    gateway = await anyio.to_thread.run_sync(lambda: build_gateway(settings, vault, route=route))
    assert gateway is not None  # only called with providers configured
    async with gateway:
        yield gateway, gateway.ledger


def _zero() -> dict[str, Any]:
    return {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": Decimal(0)}


def _add(row: dict[str, Any], record: UsageRecord) -> None:
    row["requests"] += 1
    row["input_tokens"] += record.input_tokens
    row["output_tokens"] += record.output_tokens
    row["cost_usd"] += record.cost_usd


def _records(ledger: UsageLedger, user: str) -> list[UsageRecord]:
    if ledger.file is None or not ledger.file.is_file():
        return []
    out = []
    with ledger.file.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                record = UsageRecord.from_json(line)
            except (ValueError, TypeError, KeyError):
                continue
            if record.user == user:
                out.append(record)
    return out


def _report(ledger: UsageLedger, user: str) -> dict[str, Any]:
    total = _zero()
    groups: dict[str, dict[str, dict[str, Any]]] = {"by_model": {}, "by_project": {}, "by_day": {}}
    for record in _records(ledger, user):
        _add(total, record)
        keys = {"by_model": record.model, "by_project": record.project or "-", "by_day": record.ts[:10]}
        for group, key in keys.items():
            _add(groups[group].setdefault(key, _zero()), record)

    def text(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "cost_usd": str(row["cost_usd"])}

    return {"total": text(total), **{g: {k: text(v) for k, v in rows.items()} for g, rows in groups.items()}}


async def usage_report(ledger: UsageLedger, user: str) -> dict[str, Any]:
    """``user``'s requests, tokens and USD (exact decimal strings) in total, by model, by project and by day."""
    return await anyio.to_thread.run_sync(_report, ledger, user)
