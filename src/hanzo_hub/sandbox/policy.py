"""Per-call policy: paths, URLs (SSRF), rate limits, call budgets, timeouts and result size caps.

The hub asks ``PolicyEngine.check_call`` before forwarding a call and passes the downstream result through
``PolicyEngine.filter_result``. A tool's effective policy merges, highest first: ``sandbox.servers[s].tools[t]``,
``sandbox.servers[s].defaults``, the policy declared by the manifest, ``sandbox.categories[c]``, the built-in
category ``c`` and the built-in ``default``. Every decision is written to the ``hanzo_hub.audit`` logger with who,
what, the verdict and why; argument values never are (only argument names, and a URL's host).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import socket
import time
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import anyio
from mcp.types import CallToolResult, TextContent

from hanzo_hub.config import SandboxSettings, ToolPolicySpec
from hanzo_hub.sandbox.vault import redacted_data

__all__ = ["BUILTIN_CATEGORIES", "Decision", "PolicyEngine", "ToolPolicy", "TokenBucket", "check_path"]

audit = logging.getLogger("hanzo_hub.audit")

RESOLVE_TIMEOUT = 2.0
URL_SCHEMES = frozenset({"http", "https"})
PATH_NAMES = frozenset({"path", "paths", "file", "files", "filename", "filepath", "dir", "directory", "cwd", "root"})
PATH_SUFFIXES = ("_path", "_paths", "_dir", "_file", "_directory")
URL_NAMES = frozenset({"url", "urls", "uri", "href", "endpoint", "link"})
URL_FORMATS = frozenset({"uri", "url", "iri", "uri-reference"})

BUILTIN_CATEGORIES: dict[str, ToolPolicySpec] = {
    "default": ToolPolicySpec(
        writable=False,
        allow_hosts=(),
        deny_hosts=(),
        allow_private_network=False,
        timeout=120.0,
        max_result_bytes=1024 * 1024,
        enabled=True,
    ),
    "web": ToolPolicySpec(rate_per_minute=10, burst=10, max_result_bytes=1024 * 1024, timeout=30.0),
    "files": ToolPolicySpec(writable=True, timeout=30.0),
    "code": ToolPolicySpec(timeout=60.0),
}
"""Defaults per category (the seed design's numbers: web 10 per minute and 1 MB; code 60 s)."""


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """The effective policy of one tool, after merging (see the module docstring)."""

    path_args: tuple[str, ...] | None
    """Declared path arguments (exactly these), or ``None``: detected from the tool's input schema."""
    url_args: tuple[str, ...] | None
    """Declared URL arguments (exactly these), or ``None``: detected from the tool's input schema."""
    writable: bool
    allow_hosts: tuple[str, ...]
    deny_hosts: tuple[str, ...]
    allow_private_network: bool
    rate_per_minute: float | None
    burst: int | None
    timeout: float | None
    max_result_bytes: int | None
    enabled: bool


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict on one call. ``limit`` names what refused it; ``timeout`` and ``max_result_bytes`` apply after."""

    allowed: bool
    reason: str
    limit: str | None = None
    timeout: float | None = None
    max_result_bytes: int | None = None


class TokenBucket:
    """``capacity`` tokens refilled at ``rate`` per second, on an injectable monotonic clock."""

    __slots__ = ("capacity", "clock", "rate", "stamp", "tokens")

    def __init__(self, capacity: float, rate: float, clock: Callable[[], float]) -> None:
        self.capacity, self.rate, self.clock = capacity, rate, clock
        self.tokens, self.stamp = capacity, clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def retry_after(self) -> float:
        """Seconds until one token is available (0 if one is now)."""
        self._refill()
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self) -> None:
        """Spend one token (call after ``retry_after() == 0``)."""
        self.tokens -= 1


def _variants(value: str) -> set[str]:
    """The spellings a downstream might interpret: raw, NFKC (fullwidth dots), percent-decoded, backslashes."""
    out = {value, unicodedata.normalize("NFKC", value)}
    out |= {urllib.parse.unquote(v) for v in list(out)}
    out |= {unicodedata.normalize("NFKC", v) for v in list(out)}
    out |= {v.replace("\\", "/") for v in list(out)}
    return out


def check_path(value: str, roots: Sequence[Path], base: Path | None) -> str | None:
    """Why ``value`` escapes ``roots`` (already real paths), or ``None`` when every spelling resolves inside."""
    if not roots:
        return "no allowed roots are configured for this user"
    if any(ord(ch) < 32 for ch in value):
        return "contains control characters"
    for variant in _variants(value):
        text = variant[7:] if variant.startswith("file://") else variant
        if text.startswith("~"):
            return "home-relative paths are not allowed"
        path = Path(text)
        if not path.is_absolute():
            path = (base or roots[0]) / path
        real = os.path.realpath(path)
        if not any(os.path.commonpath([real, str(root)]) == str(root) for root in roots):
            return "resolves outside the allowed roots"
    return None


def _host_matches(host: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(host, pattern.lower()) for pattern in patterns)


def _blocked_address(raw: str) -> str | None:
    try:
        ip = ipaddress.ip_address(raw.split("%", 1)[0])
    except ValueError:
        return "an unparseable address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_global and not ip.is_multicast:
        return None
    for attribute in ("loopback", "link_local", "private", "reserved", "multicast", "unspecified"):
        if getattr(ip, f"is_{attribute}"):
            return f"a {attribute.replace('_', '-')} address"
    return "a non-global address"


async def check_url(value: str, policy: ToolPolicy) -> str | None:
    """Why ``value`` may not be fetched, or ``None``. Every address the host resolves to is checked."""
    parsed = urllib.parse.urlsplit(unicodedata.normalize("NFKC", value.strip()))
    if parsed.scheme.lower() not in URL_SCHEMES:
        return f"scheme {parsed.scheme or '(none)'!r} is not allowed"
    host = (parsed.hostname or "").rstrip(".")
    if not host:
        return "has no host"
    if _host_matches(host, policy.deny_hosts):
        return f"host {host} is denied"
    if policy.allow_hosts and not _host_matches(host, policy.allow_hosts):
        return f"host {host} is not in the allow list"
    if policy.allow_private_network:
        return None
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            with anyio.fail_after(RESOLVE_TIMEOUT):
                infos = await anyio.getaddrinfo(host, parsed.port or 443, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError, UnicodeError):
            return f"host {host} does not resolve"
        addresses = [str(info[4][0]) for info in infos]
    for address in addresses:
        why = _blocked_address(address)
        if why is not None:
            return f"host {host} is {why}"
    return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _declared_args(schema: Mapping[str, Any] | None, policy: ToolPolicy) -> tuple[set[str], set[str]]:
    """The path and URL arguments: as declared when a layer declares them, else detected by name and format.

    A declaration replaces detection, so a manifest can say that a ``notebook_path`` names a file on a remote
    Jupyter server, or that ``paths`` are relative to the ``path`` repository, not local paths to confine.
    """
    paths: set[str] = set()
    urls: set[str] = set()
    properties = (schema or {}).get("properties") or {}
    for name, prop in properties.items() if isinstance(properties, dict) else ():
        prop = prop if isinstance(prop, dict) else {}
        lowered = str(name).lower()
        if prop.get("format") in URL_FORMATS or lowered in URL_NAMES or lowered.endswith("_url"):
            urls.add(name)
        elif (
            prop.get("format") == "path"
            or prop.get("x-path")
            or lowered in PATH_NAMES
            or lowered.endswith(PATH_SUFFIXES)
        ):
            paths.add(name)
    if policy.path_args is not None:
        paths = set(policy.path_args)
    if policy.url_args is not None:
        urls = set(policy.url_args)
    return paths, urls


def _merge(layers: Sequence[ToolPolicySpec | None]) -> ToolPolicy:
    merged: dict[str, Any] = {}
    for f in fields(ToolPolicy):
        values = (getattr(layer, f.name) for layer in layers if layer is not None)
        merged[f.name] = next((v for v in values if v is not None), None)
    return ToolPolicy(**merged)


class PolicyEngine:
    """Checks calls against the merged policies and keeps the rate-limit and budget state.

    Args:
        settings: the ``sandbox`` config section (roots per user, categories, servers, budgets).
        clock: monotonic seconds; inject a fake one in tests.
        redact: applied to every text block of a filtered result (e.g. ``Redactor.redact``).
    """

    def __init__(
        self,
        settings: SandboxSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.redact = redact
        self._roots = {u: tuple(Path(os.path.realpath(r.expanduser())) for r in rs) for u, rs in settings.roots.items()}
        self._buckets: dict[tuple[str, str, str], TokenBucket] = {}
        self._turns: dict[str, tuple[str | None, int]] = {}
        self._sessions: dict[str, int] = {}
        self._policies: dict[tuple[str, str, str | None, ToolPolicySpec | None], ToolPolicy] = {}

    def policy_for(
        self, server: str, tool: str, *, category: str | None = None, declared: ToolPolicySpec | None = None
    ) -> ToolPolicy:
        """The effective policy of ``server``'s ``tool`` (``category`` and ``declared`` come from its manifest)."""
        key = (server, tool, category, declared)
        cached = self._policies.get(key)
        if cached is None:
            cached = self._policies[key] = self._merged(server, tool, category, declared)
        return cached

    def _merged(self, server: str, tool: str, category: str | None, declared: ToolPolicySpec | None) -> ToolPolicy:
        spec = self.settings.servers.get(server)
        category = (spec.category if spec is not None else None) or category or "default"
        return _merge(
            [
                spec.tools.get(tool) if spec is not None else None,
                spec.defaults if spec is not None else None,
                declared,
                self.settings.categories.get(category),
                BUILTIN_CATEGORIES.get(category),
                self.settings.categories.get("default"),
                BUILTIN_CATEGORIES["default"],
            ]
        )

    def path_arguments(
        self,
        server: str,
        tool: str,
        schema: Mapping[str, Any] | None,
        *,
        category: str | None = None,
        declared: ToolPolicySpec | None = None,
    ) -> frozenset[str]:
        """The names of the tool's arguments that are checked as paths (declared, or detected in ``schema``)."""
        return frozenset(_declared_args(schema, self.policy_for(server, tool, category=category, declared=declared))[0])

    def url_arguments(
        self,
        server: str,
        tool: str,
        schema: Mapping[str, Any] | None,
        *,
        category: str | None = None,
        declared: ToolPolicySpec | None = None,
    ) -> frozenset[str]:
        """The names of the tool's arguments that are checked as URLs (declared, or detected in ``schema``)."""
        return frozenset(_declared_args(schema, self.policy_for(server, tool, category=category, declared=declared))[1])

    def roots_for(self, user: str, project: Path | None = None) -> tuple[Path, ...]:
        """The allowed path roots of ``user``, narrowed to ``project`` when it lies inside them."""
        roots = self._roots.get(user, ()) + self._roots.get("*", ())
        if project is None:
            return roots
        real = Path(os.path.realpath(project))
        inside = any(os.path.commonpath([str(real), str(root)]) == str(root) for root in roots)
        return (real,) if inside else ()

    async def check_call(
        self,
        user: str,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None,
        schema: Mapping[str, Any] | None = None,
        *,
        session: str = "default",
        turn: str | None = None,
        project: Path | None = None,
        category: str | None = None,
        declared: ToolPolicySpec | None = None,
        consume: bool = True,
        session_budget: bool = True,
        turn_scope: str | None = None,
    ) -> Decision:
        """Decide whether ``user`` may call ``server``'s ``tool`` with ``arguments`` now, and audit-log it.

        ``schema`` is the tool's input schema: properties with ``format: uri`` or URL-like names are checked as
        URLs, ``format: path``/``x-path`` or path-like names as paths. ``turn`` identifies the model turn within
        ``session`` for the per-turn budget. ``consume=False`` is a dry run (no budget or token is spent).
        ``session_budget=False`` neither checks nor counts the call against the per-session budget.
        ``turn_scope`` keeps the per-turn count under its own key instead of ``session``'s (a hub pipeline running
        its own turns inside a client's session: neither resets the other's count); forget it with ``end_session``.
        """
        policy = self.policy_for(server, tool, category=category, declared=declared)
        verdict = await self._evaluate(
            user, server, tool, arguments or {}, schema, policy, session, turn, project, session_budget,
            turn_scope or session,
        )  # fmt: skip
        if verdict is None:
            if consume:
                self._spend(user, server, tool, policy, session, turn, session_budget, turn_scope or session)
            decision = Decision(True, "allowed", None, policy.timeout, policy.max_result_bytes)
        else:
            decision = Decision(False, verdict[1], verdict[0], policy.timeout, policy.max_result_bytes)
        if audit.isEnabledFor(logging.INFO):  # building the record costs more than the check on the hot path
            audit.info(
                "%s %s/%s by %s: %s",
                "allow" if decision.allowed else "deny",
                server,
                tool,
                user,
                decision.reason,
                extra={
                    "audit": {
                        "user": user,
                        "server": server,
                        "tool": tool,
                        "session": session,
                        "allowed": decision.allowed,
                        "reason": decision.reason,
                        "limit": decision.limit,
                        "arguments": sorted(arguments or {}),
                    }
                },
            )
        return decision

    async def _evaluate(
        self,
        user: str,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        schema: Mapping[str, Any] | None,
        policy: ToolPolicy,
        session: str,
        turn: str | None,
        project: Path | None,
        session_budget: bool = True,
        turn_scope: str | None = None,
    ) -> tuple[str, str] | None:
        if not policy.enabled:
            return "disabled", "the tool is disabled by policy"
        last_turn, count = self._turns.get(turn_scope or session, (None, 0))
        if turn is not None and last_turn == turn and count >= self.settings.calls_per_turn:
            return "turn_budget", f"at most {self.settings.calls_per_turn} tool calls per turn"
        if session_budget and self._sessions.get(session, 0) >= self.settings.calls_per_session:
            return "session_budget", f"at most {self.settings.calls_per_session} tool calls per session"
        refused = await self._check_arguments(user, arguments, schema, policy, project)
        if refused is not None:
            return refused
        if policy.rate_per_minute is not None:
            wait = self._bucket(user, server, tool, policy).retry_after()
            if wait > 0:
                return "rate", f"rate limit of {policy.rate_per_minute:g} per minute; retry in {wait:.1f} s"
        return None

    async def _check_arguments(
        self,
        user: str,
        arguments: Mapping[str, Any],
        schema: Mapping[str, Any] | None,
        policy: ToolPolicy,
        project: Path | None,
    ) -> tuple[str, str] | None:
        """The path and URL checks; a ``file://`` URL names a local file and is confined like a path."""
        path_args, url_args = _declared_args(schema, policy)
        if not (path_args or url_args):
            return None  # nothing to confine (the common case for a tool without path or URL arguments)
        roots = self.roots_for(user, project) if (path_args | url_args) & arguments.keys() else ()
        for name in sorted(path_args & arguments.keys()):
            for value in _strings(arguments[name]):
                why = check_path(value, roots, roots[0] if roots else None)
                if why is not None:
                    return "path", f"argument '{name}' {why}"
        for name in sorted(url_args & arguments.keys()):
            for value in _strings(arguments[name]):
                if value.startswith("file://"):
                    why = check_path(value, roots, roots[0] if roots else None)
                    if why is not None:
                        return "path", f"argument '{name}' {why}"
                    continue
                why = await check_url(value, policy)
                if why is not None:
                    return "url", f"argument '{name}': {why}"
        return None

    def _bucket(self, user: str, server: str, tool: str, policy: ToolPolicy) -> TokenBucket:
        key = (user, server, tool)
        bucket = self._buckets.get(key)
        if bucket is None:
            rate = policy.rate_per_minute or 1.0
            bucket = TokenBucket(float(policy.burst or max(1, int(rate))), rate / 60.0, self.clock)
            self._buckets[key] = bucket
        return bucket

    def _spend(
        self,
        user: str,
        server: str,
        tool: str,
        policy: ToolPolicy,
        session: str,
        turn: str | None,
        session_budget: bool = True,
        turn_scope: str | None = None,
    ) -> None:
        if policy.rate_per_minute is not None:
            self._bucket(user, server, tool, policy).take()
        scope = turn_scope or session
        last_turn, count = self._turns.get(scope, (None, 0))
        self._turns[scope] = (turn, count + 1 if last_turn == turn else 1)
        if session_budget:
            self._sessions[session] = self._sessions.get(session, 0) + 1

    def end_session(self, session: str) -> None:
        """Forget a session's budgets."""
        self._turns.pop(session, None)
        self._sessions.pop(session, None)

    def filter_result(self, result: CallToolResult, *, max_bytes: int | None = None) -> CallToolResult:
        """Redact secrets (text blocks and structured content) and cap the result at ``max_bytes``, with a notice.

        ``max_bytes`` is ``Decision.max_result_bytes``. Structured content (usually a copy of the text) is judged
        on its own size; when it is dropped the result becomes an error result, since it no longer matches the
        tool's output schema.
        """
        cap = max_bytes if max_bytes is not None else BUILTIN_CATEGORIES["default"].max_result_bytes or 0
        kept: list[Any] = []
        used = 0
        total = 0
        for block in result.content:
            if isinstance(block, TextContent):
                text = self.redact(block.text) if self.redact is not None else block.text
                data = text.encode()
                total += len(data)
                if used + len(data) > cap:
                    text = data[: max(0, cap - used)].decode(errors="ignore")
                    data = text.encode()
                used += len(data)
                kept.append(block.model_copy(update={"text": text}))
                continue
            size = len(block.model_dump_json())
            total += size
            if used + size <= cap:
                used += size
                kept.append(block)
        structured = result.structured_content
        if structured is not None and self.redact is not None:
            structured = redacted_data(structured, self.redact)
        dropped = False
        if structured is not None:  # usually a copy of the text: judged on its own, not added to the blocks
            size = len(json.dumps(structured, default=str))
            if size > cap:
                structured, dropped = None, True
                total = max(total, size)
        if total <= cap and not dropped:
            return result.model_copy(update={"content": kept, "structured_content": structured})
        notice = f"[hanzo-hub: result truncated by policy from {total} to at most {cap} bytes]"
        kept.append(TextContent(type="text", text=notice))
        # Without its structured content the result no longer matches the tool's output schema: an error result
        # (which clients do not validate) that still carries the truncated text.
        update: dict[str, Any] = {"content": kept, "structured_content": structured}
        if dropped:
            update["is_error"] = True
        return result.model_copy(update=update)
