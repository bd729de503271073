"""Memory entries and scopes: plain data, serialisable to one JSON object per line.

A scope is (user, project, tier). The global tier belongs to a user and has no project (``project=""``); the
session tier also carries the session id, and lives only in process memory.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

Tier = Literal["session", "project", "global"]
TIERS: tuple[Tier, ...] = ("session", "project", "global")


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Who is asking: the authenticated user, the project (MCP roots or explicit id) and the MCP session."""

    user: str
    project: str
    session: str = "default"

    def key(self, tier: Tier) -> ScopeKey:
        """The storage scope of ``tier`` for this caller."""
        if tier == "global":
            return ScopeKey(self.user, "", "global", "")
        if tier == "project":
            return ScopeKey(self.user, self.project, "project", "")
        return ScopeKey(self.user, self.project, "session", self.session)


@dataclass(frozen=True, slots=True)
class ScopeKey:
    """One storage scope: every entry lives in exactly one."""

    user: str
    project: str
    tier: Tier
    session: str = ""

    @property
    def collection(self) -> str:
        """A collection name derived by hashing the scope: no name ever reveals or collides with another scope."""
        raw = "\x00".join((self.user, self.project, self.tier, self.session)).encode()
        return "mem-" + hashlib.sha256(raw).hexdigest()[:48]


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One memory. ``embedding`` is empty when not loaded; ``superseded_by`` keeps changed facts auditable."""

    id: str
    content: str
    user: str
    project: str
    tier: Tier
    created_at: float
    accessed_at: float
    access_count: int = 0
    relevance: float = 1.0
    source: str = ""
    tags: tuple[str, ...] = ()
    session: str = ""
    superseded_by: str | None = None
    embedding: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @property
    def scope(self) -> ScopeKey:
        """The storage scope this entry lives in."""
        return ScopeKey(self.user, self.project, self.tier, self.session if self.tier == "session" else "")

    @property
    def tokens(self) -> int:
        """A cheap token estimate (about four characters per token)."""
        return max(1, len(self.content) // 4)

    def evolve(self, **changes: Any) -> MemoryEntry:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)

    def to_dict(self, *, with_embedding: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; the embedding only when asked.

        Built field by field: ``dataclasses.asdict`` deep-copies the embedding float by float, which was 75% of the
        cost of storing a memory.
        """
        data = {name: getattr(self, name) for name in _PLAIN_FIELDS}
        data["tags"] = list(self.tags)
        if with_embedding:
            data["embedding"] = list(self.embedding)
        return data

    def to_json(self, *, with_embedding: bool = False) -> str:
        """One compact JSON line."""
        return json.dumps(self.to_dict(with_embedding=with_embedding), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryEntry:
        """Parse ``to_dict`` output (unknown keys are ignored)."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["tags"] = tuple(str(t) for t in known.get("tags", ()))
        known["embedding"] = tuple(float(x) for x in known.get("embedding", ()))
        return cls(**known)


_PLAIN_FIELDS = tuple(f.name for f in fields(MemoryEntry) if f.name not in ("tags", "embedding"))


def new_id() -> str:
    """A fresh random memory id."""
    return uuid.uuid4().hex


__all__ = ("TIERS", "MemoryEntry", "MemoryScope", "ScopeKey", "Tier", "new_id")
