"""One finding of ``hanzo-hub doctor`` and how a list of them is printed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["Check", "Status", "exit_status", "render_json", "render_text"]

Status = Literal["ok", "warn", "fail", "skip"]
"""``fail``: something the configuration asks for will not work; ``warn``: it works with less (or may not);
``skip``: not checked because nothing uses it."""


@dataclass(frozen=True)
class Check:
    """One finding: what was checked (``name``), how it went, what was seen, and what to do about it."""

    name: str
    status: Status
    detail: str
    hint: str | None = None


def exit_status(checks: list[Check]) -> int:
    """1 when any check failed, else 0."""
    return 1 if any(c.status == "fail" for c in checks) else 0


def render_text(checks: list[Check]) -> str:
    """One line a check (status, name, detail), its hint indented below; a summary line last."""
    width = max((len(c.name) for c in checks), default=0)
    lines = []
    for check in checks:
        lines.append(f"{check.status:<4}  {check.name:<{width}}  {check.detail}")
        if check.hint and check.status in ("warn", "fail"):
            lines.append(f"{'':<4}  {'':<{width}}  -> {check.hint}")
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail", "skip")}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "nothing checked")
    return "\n".join(lines)


def render_json(checks: list[Check]) -> str:
    """``{"ok": bool, "checks": [...]}``: ``ok`` is false when any check failed."""
    return json.dumps({"ok": exit_status(checks) == 0, "checks": [asdict(c) for c in checks]}, indent=2)
