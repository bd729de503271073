"""Per-call policy on the proxy path: one check before a call is forwarded, one filter on its result.

``Hub.call_tool`` asks ``Guard.admit`` (who is calling, which server and tool, the arguments); a denial comes back
as an ``isError`` result naming the rule that refused it, and the call is never forwarded. An admitted call runs
under ``Admission.deadline()`` (the policy's per-call timeout) and its result goes through ``Guard.release``:
secrets redacted, size capped with a notice.

Which policy: servers from the catalog, and servers with a ``sandbox.servers[name]`` entry, are *policed*: their
manifest (category, ``launch.callTimeoutSeconds``, ``sandbox.maxResultBytes``) and config decide, and path/URL
arguments are checked. Servers the user configured without any policy get the permissive-but-bounded defaults: no
path/URL/rate checks, but the default timeout, result cap and per-turn budget (the per-session budget counts only
policed calls, so a long-lived client of plain servers is never cut off). A stateless-era (2026-07-28) request has
no session: its per-turn budget is kept per (user, turn) and the per-session budget does not apply. Without
``sandbox.roots``, paths are confined to the project folder (``catalog.project``, default the working directory).
Relative path arguments are forwarded made absolute against the root they were checked in.

Every decision is audit-logged: on the ``hanzo_hub.audit`` logger (by ``PolicyEngine``) and as one JSON line in
``<home>/logs/audit.jsonl`` (rotated at 5 MB, 3 old files kept), with user, session, server, tool, argument names,
verdict and reason; never argument values or secrets. Refusals, timeouts and truncations are written at once;
allowed calls in batches at most a second old (one write instead of one per call; a killed hub loses at most that
second of "allow" lines, never a refusal). The client names its model turn with ``_meta`` key
``dev.hanzo-hub/turn`` (a string) for the per-turn budget (25 calls).

The hub's own pipelines (the ``llm`` server's ``chat``) call tools with no request context, under ``acting_as``
(``hub/identity.py``): user, the client session the hub stamped into the pipeline's request, and the pipeline's
turn. The guard files those calls like the client's own: rate limits per that user, the per-session budget of that
client session (the same id its direct calls have, in the audit too; none for a stateless client), and the per-turn
budget per pipeline turn, counted apart from the client's own turns so neither resets the other.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from anyio import current_time, move_on_at
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hanzo_hub.backends.oauth import record_secrets
from hanzo_hub.catalog.loader import CatalogEntry
from hanzo_hub.catalog.models import ToolLimits
from hanzo_hub.config import HubSettings, ToolPolicySpec
from hanzo_hub.hub.connections import connection_of, session_token, when_gone
from hanzo_hub.hub.identity import Acting, acting, current_user
from hanzo_hub.hub.llm_mount import LLM_SERVER
from hanzo_hub.hub.memory_mount import PROJECT_KEY
from hanzo_hub.hub.registry import Registry, Target
from hanzo_hub.line_log import LineLog
from hanzo_hub.sandbox.policy import Decision, PolicyEngine
from hanzo_hub.sandbox.vault import Redactor, redacted_model

__all__ = ["CATEGORY_ALIASES", "TURN_KEY", "Admission", "Guard"]

logger = logging.getLogger(__name__)

TURN_KEY = "dev.hanzo-hub/turn"
AUDIT_FILE = "audit.jsonl"
_AUDIT_ENCODER = json.JSONEncoder(ensure_ascii=False)
AUDIT_MAX_BYTES = 5 * 1024 * 1024
AUDIT_BACKUPS = 3
AUDIT_FLUSH_SECONDS = 1.0
"""Allowed calls are written in batches at most this old; refusals, timeouts and truncations at once."""
AUDIT_BATCH = 256
MAX_STATELESS_TURNS = 10_000
"""Turn budgets kept apart from a session (stateless turns, pipeline turns); the oldest is forgotten beyond this."""
CATEGORY_ALIASES = {"code-execution": "code"}
"""Catalog categories whose built-in policy has a shorter name."""


@dataclass(frozen=True, slots=True)
class ServerPolicy:
    """What the hub knows about a server's policy besides config: its manifest's category and declared limits."""

    policed: bool
    category: str | None = None
    declared: ToolPolicySpec | None = None
    tools: Mapping[str, ToolPolicySpec] = field(default_factory=dict)
    """What the manifest declares per tool, over ``declared``."""

    def for_tool(self, tool: str) -> ToolPolicySpec | None:
        """The declared policy of one tool: its own fields, else the server's."""
        own = self.tools.get(tool)
        if own is None or self.declared is None:
            return own or self.declared
        fallback = self.declared.model_dump()
        return own.model_copy(update={k: v for k, v in fallback.items() if getattr(own, k) is None})


@dataclass(slots=True)
class Admission:
    """The verdict on one call; ``refusal`` is the result to return instead of forwarding (``None``: go ahead)."""

    server: str
    tool: str
    user: str
    session: str
    decision: Decision
    arguments: dict[str, Any] | None = None
    """The arguments to forward: relative path arguments made absolute against the root they were checked in."""
    refusal: types.CallToolResult | None = None
    timed_out: bool = field(default=False)
    admitted_at: float = field(default_factory=current_time)
    """When the call was admitted (the event loop's clock): the policy's timeout counts from here."""

    @property
    def remaining(self) -> float | None:
        """Seconds left of the policy's per-call timeout (``None``: no timeout; never below zero)."""
        timeout = self.decision.timeout
        return None if timeout is None else max(0.0, self.admitted_at + timeout - current_time())

    @contextlib.contextmanager
    def deadline(self) -> Iterator[None]:
        """Bound the forwarded call by the policy's timeout, counted from admission (so a call made in legs, such
        as a first leg and then input rounds, gets one budget in all); ``timed_out`` tells whether it expired."""
        timeout = self.decision.timeout
        with move_on_at(self.admitted_at + timeout if timeout is not None else float("inf")) as scope:
            yield
        self.timed_out = self.timed_out or scope.cancelled_caught


_Record = tuple[float, Admission, str, str, list[str] | None]
"""A queued audit record: wall time, the admission, verdict, reason, argument names."""


def _absolute(value: Any, base: Path) -> Any:
    if isinstance(value, list):
        return [_absolute(item, base) for item in value]
    if not isinstance(value, str) or not value or value.startswith(("/", "~", "file:")):
        return value
    return str(base / value)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _tool_spec(limits: ToolLimits) -> ToolPolicySpec:
    """A manifest's per-tool limits in the engine's terms."""
    body = limits.model_dump(exclude_none=True)
    if "timeout_seconds" in body:
        body["timeout"] = body.pop("timeout_seconds")
    return ToolPolicySpec.model_validate(body)


def server_policies(settings: HubSettings, catalog: Mapping[str, CatalogEntry]) -> dict[str, ServerPolicy]:
    """The policy facts of every catalog server and every server with a ``sandbox.servers`` entry."""
    out: dict[str, ServerPolicy] = {}
    for name, entry in catalog.items():
        meta = entry.meta
        declared = ToolPolicySpec(
            timeout=meta.launch.call_timeout_seconds, max_result_bytes=meta.sandbox.max_result_bytes
        )
        tools = {tool: _tool_spec(limits) for tool, limits in meta.sandbox.tools.items()}
        out[name] = ServerPolicy(True, CATEGORY_ALIASES.get(meta.category, meta.category), declared, tools)
    for name in settings.sandbox.servers:
        out.setdefault(name, ServerPolicy(True))
    return out


class Guard:
    """The hub's per-call policy: the engine, what each server's manifest declares, and the audit file.

    Args:
        settings: the hub's settings (``sandbox`` section, home, project).
        catalog: the catalog entries the hub serves (by server name).
        registry: for the input schema of the tool being called.
        secrets: vault values to redact from results.
    """

    def __init__(
        self,
        settings: HubSettings,
        catalog: Mapping[str, CatalogEntry],
        registry: Registry,
        secrets: Mapping[str, str] | None = None,
        *,
        remote: bool = False,
    ) -> None:
        sandbox = settings.sandbox
        if not sandbox.roots:
            project = settings.catalog.project or Path.cwd()
            sandbox = sandbox.model_copy(update={"roots": {"*": (project,)}})
        # OAuth records are JSON values: their tokens are redacted one by one, as are those obtained later. With
        # remote servers there is a redactor even while the vault is empty: a login during serving fills it.
        secrets = secrets or {}
        self.redactor = Redactor({**secrets, **record_secrets(secrets)}) if secrets or remote else None
        self._unredacted_warned = False
        self.redact: Callable[[str], str] | None = self.redactor.redact if self.redactor is not None else None
        """The vault's redaction of a text (``None``: the vault is empty), for everything bound for a client."""
        self.engine = PolicyEngine(sandbox, redact=self.redact)
        self.user = settings.user
        self.catalog = dict(catalog)
        self.policies = server_policies(settings, catalog)
        self._unpoliced = ServerPolicy(False)
        self._registry = registry
        self._schemas: dict[str, tuple[object, dict[str, Any]]] = {}
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._turn_keys: dict[str, None] = {}
        self._stamps: dict[str, str | None] = {}
        """A client connection as the hub stamps it for its own servers -> its session id (``None``: stateless)."""
        self._audit_path = settings.log_dir / AUDIT_FILE
        self._audit = LineLog(
            self._audit_path, max_bytes=AUDIT_MAX_BYTES, backups=AUDIT_BACKUPS, what="the audit file"
        )  # a failing disk drops records with one warning; the hanzo_hub.audit logger still has each decision
        self._pending: list[_Record] = []
        self._flushed = time.monotonic()

    def learn_secret(self, name: str, value: str) -> None:
        """Redact ``value`` too from now on (an OAuth token obtained while serving). A hub that started with an
        empty vault and no remote server has no redactor; it redacts such tokens after a restart (logged)."""
        if self.redactor is not None:
            self.redactor.add(name, value)
        elif not self._unredacted_warned:  # a remote server added by a reload to a hub that had none
            self._unredacted_warned = True
            logger.warning("restart the hub so that it redacts the OAuth tokens of its remote servers")

    def reconfigure(self, settings: HubSettings, catalog: Mapping[str, CatalogEntry]) -> None:
        """The catalog servers served after a reloaded config, and their policies."""
        self.catalog = dict(catalog)
        self.policies = server_policies(settings, catalog)

    def close(self) -> None:
        """Write what is pending and close the audit file (never raises: a full disk only loses the records)."""
        self._flush()
        self._audit.close()

    # -- the two hooks --------------------------------------------------------------------------------------------

    async def admit(
        self, target: Target, arguments: Mapping[str, Any] | None, ctx: ServerRequestContext[Any, Any] | None
    ) -> Admission:
        """Check one call before it is forwarded (and spend its budget and rate tokens if it is allowed)."""
        policy = self.policies.get(target.server, self._unpoliced)
        meta = ((ctx.params or {}).get("_meta") or {}) if ctx is not None else {}
        turn = meta.get(TURN_KEY)
        project = meta.get(PROJECT_KEY)
        user = current_user(self.user)
        turn = turn if isinstance(turn, str) else None
        on_behalf = acting() if ctx is None else None
        turn_scope = None
        if on_behalf is not None:  # a hub pipeline's call for a client: that client's session, the pipeline's turn
            session, stateless, turn = self._stamped_session(on_behalf), False, on_behalf.turn
            if session is None:
                session, stateless = self._stateless_key(user, turn), True
            elif turn is not None:
                turn_scope = self._turn_key(f"{session}#turn:{turn}")
        else:
            stateless = ctx is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            session = self._stateless_key(user, turn) if stateless else self._session(ctx)
            if target.server == LLM_SERVER and ctx is not None:
                self._stamp(ctx, None if stateless else session)
        decision = await self.engine.check_call(
            user,
            target.server,
            target.original,
            arguments,
            self.schema(target) if policy.policed else None,
            session=session,
            turn=turn,
            project=Path(project) if isinstance(project, str) and os.path.isabs(project) else None,
            category=policy.category,
            declared=policy.for_tool(target.original),
            session_budget=policy.policed and not stateless,
            turn_scope=turn_scope,
        )
        forwarded = dict(arguments) if arguments is not None else None
        admission = Admission(target.server, target.original, user, session, decision, forwarded)
        self._write(admission, "allow" if decision.allowed else "deny", decision.reason, arguments)
        if decision.allowed and policy.policed and forwarded:
            self._absolutize(admission, forwarded, schema_of=target, policy=policy, project=project)
        if not decision.allowed:
            admission.refusal = _error(
                f"hanzo-hub policy denied {target.server}/{target.original} ({decision.limit}): {decision.reason}"
            )
        return admission

    def release(
        self, admission: Admission, result: types.CallToolResult | types.InputRequiredResult | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The result as the client may see it: a timeout error (``result`` is then ``None``), or redacted, capped."""
        if admission.timed_out or result is None:
            self._write(admission, "timeout", f"no result within {admission.decision.timeout:g} s", None)
            return _error(
                f"hanzo-hub policy: {admission.server}/{admission.tool} timed out after "
                f"{admission.decision.timeout:g} s (per-call timeout)"
            )
        if not isinstance(result, types.CallToolResult):  # a stateless-era server's questions for the client
            return redacted_model(result, self.redact)
        filtered = self.engine.filter_result(result, max_bytes=admission.decision.max_result_bytes)
        if len(filtered.content) != len(result.content) or filtered.structured_content != result.structured_content:
            self._write(admission, "truncate", f"result capped at {admission.decision.max_result_bytes} bytes", None)
        return filtered

    # -- helpers --------------------------------------------------------------------------------------------------

    def _absolutize(
        self, admission: Admission, arguments: dict[str, Any], *, schema_of: Target, policy: ServerPolicy, project: Any
    ) -> None:
        """Make relative path arguments absolute against the root the engine checked them in (its ``base``).

        A downstream would otherwise resolve them against its own working directory, which may lie elsewhere.
        """
        names = self.engine.path_arguments(
            schema_of.server, schema_of.original, self.schema(schema_of), category=policy.category,
            declared=policy.for_tool(schema_of.original),
        )  # fmt: skip
        relative = [n for n in names & arguments.keys() if isinstance(arguments[n], str | list)]
        if not relative:
            return
        narrowed = Path(project) if isinstance(project, str) and os.path.isabs(project) else None
        roots = self.engine.roots_for(admission.user, narrowed)
        if not roots:
            return
        for name in relative:
            arguments[name] = _absolute(arguments[name], roots[0])

    async def dry_run(
        self,
        target: Target,
        arguments: Mapping[str, Any] | None,
        *,
        user: str,
        turn: str | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> Decision:
        """What ``admit`` would decide for ``user``, spending nothing (for ``hanzo-hub policy check``).

        ``schema`` stands in for the tool's input schema when the hub has no listing of its server yet.
        """
        policy = self.policies.get(target.server, self._unpoliced)
        return await self.engine.check_call(
            user,
            target.server,
            target.original,
            arguments,
            (self.schema(target) or schema) if policy.policed else None,
            session="dry-run",
            turn=turn,
            category=policy.category,
            declared=policy.for_tool(target.original),
            consume=False,
            session_budget=policy.policed,
        )

    def schema(self, target: Target) -> dict[str, Any] | None:
        """The input schema of the tool ``target`` names, from the registry's listing of its server."""
        listing = self._registry.listings.get(target.server)
        if listing is None:
            return None
        cached = self._schemas.get(target.server)
        if cached is None or cached[0] is not listing:
            cached = (listing, {tool.name: tool.input_schema for tool in listing.tools})
            self._schemas[target.server] = cached
        schema = cached[1].get(target.original)
        return schema if isinstance(schema, dict) else None

    def _stateless_key(self, user: str, turn: str | None) -> str:
        """Budgets of a stateless-era request: no session exists, so its turn (per user) is the unit."""
        if turn is None:
            return "stateless"
        return self._turn_key(f"{user}#turn:{turn}")

    def _turn_key(self, key: str) -> str:
        """Keep ``key``'s turn budget among the most recent ``MAX_STATELESS_TURNS`` (no end of a turn is signalled)."""
        if key not in self._turn_keys:
            self._turn_keys[key] = None
            if len(self._turn_keys) > MAX_STATELESS_TURNS:
                oldest = next(iter(self._turn_keys))
                del self._turn_keys[oldest]
                self.engine.end_session(oldest)
        return key

    def _stamp(self, ctx: ServerRequestContext[Any, Any], session: str | None) -> None:
        """Remember which session a client's call into the ``llm`` server comes from, under the id the hub stamps
        into that call for the server (``dev.hanzo-hub/session``: ``hub.project.identity_for``), for as long as
        the client's connection lives; the pipeline's calls for that client bring the stamp back (``acting_as``)."""
        connection = connection_of(ctx)
        if connection is None:
            return
        stamp = session_token(connection)
        if stamp in self._stamps:
            return
        self._stamps[stamp] = session
        when_gone(connection, self._forget_stamp)

    def _forget_stamp(self, stamp: str) -> None:
        self._stamps.pop(stamp, None)

    def _stamped_session(self, on_behalf: Acting) -> str | None:
        """The session a pipeline call belongs to (``None``: a stateless client's). A stamp the guard never saw
        (the pipeline run without a client, ``"default"``) is its own session."""
        return self._stamps.get(on_behalf.session, on_behalf.session)

    def _session(self, ctx: ServerRequestContext[Any, Any] | None) -> str:
        """A stable id per client connection (``hub.connections``); its budgets are forgotten when it ends."""
        connection = connection_of(ctx)
        if connection is None:
            return "default"
        if connection not in self._sessions:
            with contextlib.suppress(TypeError):  # not weak-referenceable: its end cannot be seen
                self._sessions.add(connection)
                when_gone(connection, self.engine.end_session)
        return session_token(connection)

    def _write(self, admission: Admission, verdict: str, reason: str, arguments: Mapping[str, Any] | None) -> None:
        """Queue one audit record; it is encoded when the batch is written (allowed calls: at most a second later)."""
        names = sorted(arguments) if arguments is not None else None
        self._pending.append((time.time(), admission, verdict, reason, names))
        if verdict != "allow":
            self._flush()
            return
        now = time.monotonic()
        if now - self._flushed >= AUDIT_FLUSH_SECONDS or len(self._pending) >= AUDIT_BATCH:
            self._flush(now)

    def _line(self, record: _Record) -> str:
        ts, admission, verdict, reason, names = record
        body: dict[str, Any] = {
            "ts": round(ts, 3),
            "user": admission.user,
            "session": admission.session,
            "server": admission.server,
            "tool": admission.tool,
            "verdict": verdict,
            "limit": admission.decision.limit,
            "reason": reason,
        }
        if names is not None:
            body["arguments"] = names
        line = _AUDIT_ENCODER.encode(body)
        return self.redact(line) if self.redact is not None else line

    def _flush(self, now: float | None = None) -> None:
        """Append the pending audit lines in one write (a write and a flush per call cost more than the check)."""
        records, self._pending = self._pending, []
        self._flushed = time.monotonic() if now is None else now
        if not records:
            return
        self._audit.write(("\n".join(self._line(record) for record in records) + "\n").encode())
