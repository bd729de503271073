"""The usage ledger: tokens and cost per request, user and project, persisted; budgets checked before spending.

Every answered request appends one JSON line to ``<home>/llm/usage.jsonl`` (append-only; replayed at start, so
totals survive a restart). Costs are :class:`~decimal.Decimal` USD computed exactly from the registry's prices per
million tokens, written as strings. Budgets (per user and per project; per UTC day, UTC month and in total) are
checked by :meth:`UsageLedger.reserve` against what was spent plus what requests in flight may still spend, so
concurrent requests cannot together overspend; the reservation becomes the real cost when the request ends.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio

from hanzo_hub.config.llm import BudgetSettings, BudgetSpec
from hanzo_hub.errors import BudgetExceeded
from hanzo_hub.line_log import LineLog
from hanzo_hub.llm.registry import ModelSpec
from hanzo_hub.llm.types import Caller, ChatResult, Usage

__all__ = ["LEDGER_FILE", "Reservation", "Totals", "UsageLedger", "UsageRecord", "cost_of", "usd"]

logger = logging.getLogger(__name__)

LEDGER_FILE = "usage.jsonl"
MILLION = Decimal(1_000_000)
PERIODS = ("day", "month", "total")


def cost_of(model: ModelSpec, usage: Usage) -> Decimal:
    """Exact USD cost of ``usage`` at ``model``'s prices (per million tokens)."""
    price_in, price_out = Decimal(str(model.price_in)), Decimal(str(model.price_out))
    return ((usage.input_tokens * price_in + usage.output_tokens * price_out) / MILLION).normalize()


def usd(amount: Decimal) -> str:
    """``amount`` as plain decimal text (never scientific notation): ``0.0000045``."""
    return format(amount.normalize(), "f")


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One answered request as the ledger keeps it."""

    ts: str
    request_id: str
    user: str
    project: str | None
    model: str
    provider: str
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal

    @classmethod
    def of(cls, request_id: str, caller: Caller, result: ChatResult, cost: Decimal) -> UsageRecord:
        """The record of ``result`` answered for ``caller``, stamped now (UTC)."""
        return cls(
            ts=datetime.now(UTC).isoformat(timespec="seconds"),
            request_id=request_id,
            user=caller.user,
            project=caller.project,
            model=result.model,
            provider=result.provider,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            cost_usd=cost,
        )

    def to_json(self) -> str:
        data: dict[str, Any] = {k: getattr(self, k) for k in self.__slots__}
        data["cost_usd"] = usd(self.cost_usd)
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> UsageRecord:
        data = json.loads(line)
        data["cost_usd"] = Decimal(data["cost_usd"])
        return cls(**data)

    def periods(self) -> tuple[str, str, str]:
        """The keys of the day, month and total this record counts in."""
        return self.ts[:10], self.ts[:7], "total"


@dataclass(frozen=True, slots=True)
class Totals:
    """Tokens, cost and request count."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal = Decimal(0)

    def plus(self, r: UsageRecord) -> Totals:
        return Totals(
            self.requests + 1,
            self.input_tokens + r.input_tokens,
            self.output_tokens + r.output_tokens,
            self.cost_usd + r.cost_usd,
        )


class Reservation:
    """Money a request in flight may spend, held against its budgets until released or recorded."""

    def __init__(self, ledger: UsageLedger, scopes: list[str], amount: Decimal) -> None:
        self._ledger = ledger
        self.scopes = scopes
        self.amount = amount
        self._open = True

    def release(self) -> None:
        """Stop holding the money (idempotent)."""
        if self._open:
            self._open = False
            for scope in self.scopes:
                self._ledger._pending[scope] -= self.amount


class UsageLedger:
    """Usage per request, user and project, with budgets.

    Args:
        directory: where ``usage.jsonl`` lives (``<home>/llm``); ``None`` keeps it in memory only.
        budgets: the limits to enforce.
        now: the clock deciding the current UTC day and month.
    """

    def __init__(
        self,
        directory: Path | None,
        budgets: BudgetSettings | None = None,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.file = directory / LEDGER_FILE if directory is not None else None
        self.budgets = budgets or BudgetSettings()
        self._now = now
        self._totals: dict[tuple[str, str], Totals] = defaultdict(Totals)
        self._pending: dict[str, Decimal] = defaultdict(Decimal)
        self._write_lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        # A failing disk drops ledger lines with one warning: the answer was paid for and still reaches the caller,
        # and this process keeps counting the spend for budgets.
        self._log = LineLog(self.file, what="the usage ledger", keep_open=False) if self.file is not None else None
        if self.file is not None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            for record in self._replay():
                self._add(record)

    def _replay(self) -> Iterator[UsageRecord]:
        assert self.file is not None
        if not self.file.exists():
            return
        with self.file.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield UsageRecord.from_json(line)
                except (ValueError, TypeError, KeyError):
                    logger.warning("usage ledger %s: line %d is unreadable; skipped", self.file, number)

    @staticmethod
    def _scopes(caller: Caller) -> list[str]:
        scopes = [f"user:{caller.user}"]
        if caller.project is not None:
            scopes.append(f"project:{caller.project}")
        return scopes

    def _add(self, record: UsageRecord) -> None:
        caller = Caller(user=record.user, project=record.project)
        for scope in self._scopes(caller):
            for period in record.periods():
                self._totals[(scope, period)] = self._totals[(scope, period)].plus(record)

    def _budget(self, scope: str) -> BudgetSpec:
        kind, _, name = scope.partition(":")
        if kind == "user":
            return self.budgets.users.get(name, self.budgets.default_user)
        return self.budgets.projects.get(name, self.budgets.default_project)

    def _period_key(self, period: str) -> str:
        now = self._now()
        return {"day": now.strftime("%Y-%m-%d"), "month": now.strftime("%Y-%m"), "total": "total"}[period]

    def totals(self, scope: str, period: str = "total") -> Totals:
        """What ``scope`` (``user:<id>`` or ``project:<id>``) used in the current ``period`` (day, month, total)."""
        return self._totals.get((scope, self._period_key(period)), Totals())

    def spent(self, scope: str, period: str = "total") -> Decimal:
        """USD ``scope`` spent in the current ``period``."""
        return self.totals(scope, period).cost_usd

    def reserve(self, caller: Caller, estimate: Decimal) -> Reservation:
        """Hold ``estimate`` against every budget of ``caller``.

        Raises:
            BudgetExceeded: spent + held + ``estimate`` would pass a limit; nothing is held.
        """
        scopes = self._scopes(caller)
        for scope in scopes:
            budget = self._budget(scope)
            for period, limit in zip(PERIODS, (budget.daily, budget.monthly, budget.total), strict=True):
                if limit is None:
                    continue
                used = self.spent(scope, period) + self._pending[scope]
                if used + estimate > limit:
                    raise BudgetExceeded(scope, period, limit=usd(limit), spent=usd(used), estimate=usd(estimate))
        for scope in scopes:
            self._pending[scope] += estimate
        return Reservation(self, scopes, estimate)

    async def record(self, record: UsageRecord, reservation: Reservation | None = None) -> None:
        """Count ``record`` (and stop holding ``reservation``), then append it to the file off the event loop."""
        if reservation is not None:
            reservation.release()
        self._add(record)
        if self.file is not None:
            await anyio.to_thread.run_sync(self._append, record.to_json(), limiter=self._limiter)

    def _append(self, line: str) -> None:
        assert self._log is not None
        with self._write_lock:
            self._log.write((line + "\n").encode())
