"""The ``tools/call`` fast path: a client's call relayed as raw JSON-RPC to the server that has the tool.

A proxied call through SDK objects validates the same message four times: the front parses the client's params into
a typed model, the hub's ``Client`` validates the downstream's result (and its structured content against the
output schema), and the front dumps that result and validates it again on the way out, while the end client
validates it once more. When both ends speak the handshake era none of that changes the bytes: the hub only renames
the tool. So this middleware of the front server sends the client's ``arguments`` unchanged to the downstream
through a raw channel beside the SDK session (``hanzo_hub.backends.rawchannel``: no dispatcher, no validation) and
hands the downstream's result dict back as it came, less the downstream's ``serverInfo`` stamp. The end client is
the one that validates it, exactly as it would validate a direct server.

A stateless-era (2026-07-28) server over stdio takes it too: the request carries the era's ``_meta`` as the SDK's
session would stamp it (version, client info, the relayed client's capabilities, the log-level opt-in), and the
result loses its ``resultType`` for a handshake-era client. When such a server asks for input instead of answering
(an ``InputRequiredResult``: sampling, elicitation, roots), a stateless-era client gets the round as it came (its
retry takes the normal path), and for a handshake-era client the SDK's client drives the rounds through the relay,
retrying on the typed session, as the normal path would.

Everything that makes a proxied call a hub call is kept: the relay bookkeeping (the server's sampling, elicitation,
roots and log messages during the call go to this client), the log-level opt-in, the supervisor's lazy start,
deadline, crash detection and idle accounting, and fail-open error results. Calls that need more than renaming take
the normal path: a stateless-era client whose call may need the era bridge, a stateless-era server over HTTP
(the SDK's transport adds the era's headers), retries carrying input responses, progress tokens (the front maps
them), the hub's own memory server (identity stamping), servers with ``error_patterns`` (the hub reads their
results), search exposure (virtual tools), a server not running yet
(the normal path starts it; its next call is fast), in-process servers (no transport to share), and malformed params
(the normal path reports them precisely).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import mcp_types as types
from mcp import Client, MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from hanzo_hub.backends.base import client_capabilities
from hanzo_hub.errors import BackendError, BackendTimeout, ToolNotFound
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.downstream_requests import is_modern
from hanzo_hub.hub.guard import Admission
from hanzo_hub.hub.memory_mount import MEMORY_SERVER
from hanzo_hub.hub.registry import Target
from hanzo_hub.hub.search import CALL_TOOL, FIND_TOOLS, needs_front

logger = logging.getLogger(__name__)

_TOOLS_CALL = "tools/call"
_BRIDGED = frozenset({"sampling", "elicitation", "roots"})


class RequestLike(Protocol):
    """What :meth:`RawToolCalls.intercept` reads of a request: a ``JSONRPCRequest``, or a transport's lighter copy."""

    @property
    def id(self) -> types.RequestId: ...
    @property
    def method(self) -> str: ...
    @property
    def params(self) -> dict[str, Any] | None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """An eligible call: its server, the downstream params, and the live client the plan was made against."""

    target: Target
    params: dict[str, Any]
    client: Client
    modern: bool = False
    """The server speaks the stateless era: each request carries the era's ``_meta``, its answer may ask for input."""
    exposed: str = ""
    """The tool's name as the client called it."""


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _error_model(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _dump(result: types.CallToolResult | types.InputRequiredResult) -> dict[str, Any]:
    body: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return body


def _size(result: dict[str, Any]) -> int:
    """An upper bound of what the policy's result cap measures (text bytes, other blocks and structured content)."""
    total = 0
    for block in result.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            total += len(block["text"]) * 4  # UTF-8 bytes, at most four per character
        else:
            total += len(json.dumps(block, separators=(",", ":")))
    structured = result.get("structuredContent")
    if structured is not None:
        total += len(json.dumps(structured, separators=(",", ":"))) * 2
    return total


def _within(result: dict[str, Any], text: bytes | None, cap: int) -> bool:
    """Whether ``result`` is surely under the cap. With the downstream's own text, six bytes per byte of it bound
    :func:`_size` without encoding anything: each part of the result is a disjoint stretch of that text, and
    re-encoding a stretch takes at most three bytes per byte (``\\uXXXX`` for a multibyte character).
    """
    if text is not None and len(text) * 6 <= cap:
        return True
    return _size(result) <= cap


_BLOCK_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
}


def _malformed(result: Any) -> str | None:
    """What makes ``result`` an invalid ``tools/call`` result that the client's SDK could not read (else ``None``).

    A check of the shape alone, a few lookups a block: the fields each known content type requires, the error flag
    and the structured content. A content type this hub does not know passes (a newer client may know it)."""
    if not isinstance(result, dict):
        return "the result is not an object"
    content = result.get("content")
    if not isinstance(content, list):
        return "its content is not a list"
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            return f"content[{index}] is not an object"
        kind = block.get("type")
        if kind == "resource":
            if not isinstance(block.get("resource"), dict):
                return f"content[{index}] (resource) has no resource object"
            continue
        for name in _BLOCK_FIELDS.get(kind, ()):  # type: ignore[arg-type]
            if not isinstance(block.get(name), str):
                return f"content[{index}] ({kind}) has no string {name!r}"
    if not isinstance(result.get("isError", False), bool):
        return "its isError is not a boolean"
    structured = result.get("structuredContent")
    if structured is not None and not isinstance(structured, dict):
        return "its structuredContent is not an object"
    return None


def _unstamped(result: dict[str, Any]) -> dict[str, Any]:
    """Drop the downstream's ``serverInfo`` stamp: the hub answered (and the front stamps itself)."""
    meta = result.get("_meta")
    if not isinstance(meta, dict) or types.SERVER_INFO_META_KEY not in meta:
        return result
    rest = {key: value for key, value in meta.items() if key != types.SERVER_INFO_META_KEY}
    body = {key: value for key, value in result.items() if key != "_meta"}
    if rest:
        body["_meta"] = rest
    return body


def _stamped_version(params: Mapping[str, Any] | None) -> str | None:
    """The protocol version a stateless-era request carries in its ``_meta``, if it is one."""
    meta = (params or {}).get("_meta")
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _relayable_era(version: str, params: Mapping[str, Any] | None) -> bool:
    """Whether a call in ``version`` needs nothing of the hub but renaming.

    Handshake-era calls do. A stateless-era client's call over a handshake-era server does only when the client
    declared none of the capabilities the era bridge exists for (sampling, elicitation, roots): then the bridge
    would refuse the server's requests just as the relay does.
    """
    if version in HANDSHAKE_PROTOCOL_VERSIONS:
        return True
    if version not in MODERN_PROTOCOL_VERSIONS:
        return False
    meta = (params or {}).get("_meta")
    declared = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    return isinstance(declared, dict) and not (_BRIDGED & declared.keys())


class RawToolCalls:
    """Front-server middleware relaying eligible ``tools/call`` requests as raw JSON-RPC (see the module doc)."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        self._enabled = not needs_front(hub.settings.exposure)
        self._front_names = frozenset((FIND_TOOLS, CALL_TOOL) if hub.settings.exposure.mode == "auto" else ())
        """Names the front decides on in exposure 'auto' (the hub's search tools, or a downstream's of that name)."""
        self.fast_calls = 0
        """How many calls took the fast path (for tests and health)."""
        self._last_ctx: ServerRequestContext[Any, Any] | None = None
        self._standalone: tuple[ServerRequestContext[Any, Any], ServerRequestContext[Any, Any]] | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        self._last_ctx = ctx
        if not self._enabled or ctx.method != _TOOLS_CALL or not _relayable_era(ctx.protocol_version, ctx.params):
            return await call_next(ctx)
        plan = self._plan(ctx.params)
        if plan is None:
            return await call_next(ctx)
        result, _ = await self._relay(ctx, plan)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and "resultType" not in result:
            result["resultType"] = "complete"  # a handshake-era server's result (the spec's absent-means-complete)
        return result

    def intercept(self, message: RequestLike) -> Callable[[], Awaitable[types.JSONRPCMessage | bytes]] | None:
        """For a single-connection transport (stdio): answer an eligible ``tools/call`` without the SDK session.

        Returns the coroutine function that makes the response, or ``None`` when the request must go to the session:
        any other request, an ineligible call, a connection with no request seen yet, or a stateless-era request
        that opted in to log messages (they belong on its own request's stream, which only the session has). A
        stateless-era request without that opt-in gets no log messages at all (the relay drops them), and one whose
        client declared sampling, elicitation or roots needs the era bridge (the normal path).

        The connection's latest request context, without its request id, stands in for this request's: the relay
        needs the session and the client's declared capabilities (both the connection's), and sends the server's
        requests and log messages on the connection's own channel. A stateless-era request brings its own version
        and params (its ``_meta`` carries its capabilities and opt-ins).
        """
        latest = self._last_ctx
        if latest is None or not self._enabled or message.method != _TOOLS_CALL:
            return None
        version = _stamped_version(message.params)
        if not self._transport_era(latest, version, message.params):
            return None
        plan = self._plan(message.params)
        if plan is None:
            return None
        ctx: ServerRequestContext[Any, Any]
        if version is None:
            if self._standalone is None or self._standalone[0] is not latest:
                # No request id: the relay then sends on the connection's own channel (a finished request's is
                # closed).
                self._standalone = (latest, dataclasses.replace(latest, request_id=None))
            ctx = self._standalone[1]
        else:
            ctx = dataclasses.replace(
                latest, request_id=None, protocol_version=version, method=_TOOLS_CALL, params=message.params, meta=None
            )
        logger.debug("tools/call %s: fast path on the transport", plan.params["name"])

        async def answer() -> types.JSONRPCMessage | bytes:
            try:
                result, text = await self._relay(ctx, plan)
            except MCPError as exc:
                return types.JSONRPCError(jsonrpc="2.0", id=message.id, error=exc.error)
            except Exception:  # a transport task: one bad call must not end the connection
                logger.exception("the tools/call fast path failed")
                error = types.ErrorData(code=types.INTERNAL_ERROR, message="internal error in the hub")
                return types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
            if version is not None and "resultType" not in result:
                result["resultType"] = "complete"  # as the session's path answers (absent-means-complete)
                if text is not None:
                    text = text.rstrip()[:-1] + _COMPLETE
            return _response_line(message.id, result, text)

        return answer

    @staticmethod
    def _transport_era(
        latest: ServerRequestContext[Any, Any], version: str | None, params: Mapping[str, Any] | None
    ) -> bool:
        """Whether a request stamped with ``version`` (``None``: the connection's era) may be answered here."""
        if version is None:
            return latest.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        if version not in MODERN_PROTOCOL_VERSIONS or not _relayable_era(version, params):
            return False
        # A log-level opt-in: its log messages go on its own request's stream, the session's.
        return LOG_LEVEL_META_KEY not in (params or {}).get("_meta", {})

    def _plan(self, params: Mapping[str, Any] | None) -> _Plan | None:
        """The server and downstream params of an eligible call, else ``None`` (normal path)."""
        if not params:
            return None
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return None
        if name in self._front_names:
            return None
        if meta is not None and (not isinstance(meta, dict) or meta.get("progressToken") is not None):
            return None
        if set(params) - {"name", "arguments", "_meta"}:
            return None  # fields of a later revision: let the typed path decide
        try:
            target = self._hub.registry.resolve_tool(name)
        except ToolNotFound:
            return None
        if target.server == MEMORY_SERVER or self._hub.error_patterns(target.server):
            return None  # identity stamping, or results the hub must read (plain-text failures)
        supervisor = self._hub.pool.get(target.server)
        client, channel = supervisor.client, supervisor.raw_channel
        if client is None or channel is None:
            return None
        modern = is_modern(client)
        if modern and not channel.piped:
            return None  # over HTTP the era's headers come from the SDK's transport: the normal path
        body: dict[str, Any] = {"name": target.original}
        if arguments is not None:
            body["arguments"] = arguments
        return _Plan(target, body, client, modern, name)

    async def _relay(self, ctx: ServerRequestContext[Any, Any], plan: _Plan) -> tuple[dict[str, Any], bytes | None]:
        """The call's result, and its JSON text when that is the downstream's own, unchanged (else ``None``)."""
        hub = self._hub
        target, params = plan.target, plan.params
        hub.notifier.track(ctx.session, ctx.protocol_version)
        admission = await hub.guard.admit(target, params.get("arguments"), ctx)  # per-call policy, as on the typed path
        if admission.refusal is not None:
            return _dump(admission.refusal), None
        if admission.arguments is not None:
            params["arguments"] = admission.arguments
        try:
            answer = await self._forward(ctx, plan, admission)
        except BackendError as exc:  # its text may quote the server's stderr: redacted like any result
            if hub.login_prompt.applies(target.server, ctx):
                return await self._mended(ctx, plan, exc), None
            redact = hub.guard.redact
            return _error_result(redact(str(exc)) if redact is not None else str(exc)), None
        if answer is None:
            return _dump(hub.guard.release(admission, None)), None  # the policy's per-call timeout expired
        raw, text = answer
        modern_client = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if isinstance(raw, dict) and raw.get("resultType", "complete") != "complete":
            self.fast_calls += 1  # its first leg
            if modern_client:
                return raw, text  # an input round for a stateless-era client: its retry takes the normal path
            return _dump(hub.guard.release(admission, await self._rounds(ctx, plan, admission, raw))), None
        if not modern_client and isinstance(raw, dict) and "resultType" in raw:  # not a field of the client's era
            raw, text = {key: value for key, value in raw.items() if key != "resultType"}, None
        return self._released(target.server, admission, raw, text)

    async def _mended(self, ctx: ServerRequestContext[Any, Any], plan: _Plan, failure: BackendError) -> dict[str, Any]:
        """A remote server that wants a login (one lost, or more scopes): the client's user logs in, as on the typed
        path (``LoginPrompt.mend``), and the call is made again there."""
        hub = self._hub

        async def retry() -> types.CallToolResult | types.InputRequiredResult:
            return await hub.call_tool(plan.exposed, plan.params.get("arguments"), None, ctx)

        try:
            mended = await hub.login_prompt.mend(plan.target.server, plan.target.original, ctx, failure, retry)
        except BackendError as exc:
            redact = hub.guard.redact
            return _error_result(redact(str(exc)) if redact is not None else str(exc))
        return _dump(mended)

    def _stamped(self, ctx: ServerRequestContext[Any, Any], plan: _Plan) -> dict[str, Any]:
        """The params of a call to a stateless-era server as the SDK's session would send them: the era's ``_meta``
        (version, client info, the relayed client's capabilities, the log-level opt-in) on the client's own."""
        hub = self._hub
        params = {**plan.params, "_meta": dict(hub.relay.downstream_meta(ctx) or {})}
        data = {"method": _TOOLS_CALL, "params": params}
        plan.client.session._stamp(data, {})  # pyright: ignore[reportPrivateUsage]
        capabilities = hub.relayed_capabilities(ctx)
        if capabilities is not None:
            params["_meta"][CLIENT_CAPABILITIES_META_KEY] = capabilities
        return params

    async def _rounds(
        self, ctx: ServerRequestContext[Any, Any], plan: _Plan, admission: Admission, raw: dict[str, Any]
    ) -> types.CallToolResult | None:
        """A stateless-era server asked a handshake-era client's call for input (sampling, elicitation, roots): the
        SDK's client drives the rounds (through the relay, to this client) and retries on the normal path, within
        the policy's per-call timeout (``None``: it expired)."""
        hub, params, server = self._hub, plan.params, plan.target.server
        try:
            first = types.InputRequiredResult.model_validate(raw, by_name=False)
        except ValueError:
            return _error_model(f"server {server!r} answered tools/call with an invalid input request")
        meta = hub.relay.downstream_meta(ctx)

        async def op(client: Client) -> types.CallToolResult:
            async def retry(
                responses: types.InputResponses | None, state: str | None
            ) -> types.CallToolResult | types.InputRequiredResult:
                return await client.session.call_tool(
                    params["name"],
                    params.get("arguments"),
                    input_responses=responses,
                    request_state=state,
                    meta=meta,
                    allow_input_required=True,
                )

            with client_capabilities(hub.relayed_capabilities(ctx)):
                done: types.CallToolResult = await client._drive_input_required(first, retry)  # pyright: ignore[reportPrivateUsage]
                return done

        result: types.CallToolResult | None = None  # stays None when the policy's deadline expires
        try:
            with hub.relay.calling(server, ctx), admission.deadline():
                result = await hub.pool.get(server).request(op)
        except BackendError as exc:  # its text may quote the server's stderr: redacted like any result
            redact = hub.guard.redact
            return _error_model(redact(str(exc)) if redact is not None else str(exc))
        return result

    async def _forward(
        self, ctx: ServerRequestContext[Any, Any], plan: _Plan, admission: Admission
    ) -> tuple[dict[str, Any], bytes | None] | None:
        """The downstream's raw answer (``None``: the policy's per-call timeout expired).

        One deadline, the sooner of the policy's per-call timeout and the server's call timeout, kept by the raw
        channel's timer (no cancel scope). A server restarted since the plan takes the supervisor's ``request``.

        Raises:
            BackendError: the server is unavailable, timed out or crashed.
        """
        hub = self._hub
        server, params = plan.target.server, plan.params
        supervisor = hub.pool.get(server)
        policy_timeout, call_timeout = admission.remaining, supervisor.call_timeout
        deadline = call_timeout if policy_timeout is None else min(policy_timeout, call_timeout)
        sent = self._stamped(ctx, plan) if plan.modern else params
        with hub.relay.calling(server, ctx):
            try:
                answer = await supervisor.raw_request(plan.client, _TOOLS_CALL, sent, deadline)
            except TimeoutError:
                if deadline >= call_timeout:
                    raise BackendTimeout(server, f"did not answer within {call_timeout:g} s") from None
                admission.timed_out = True
                return None
            if answer is not None:
                return answer

            async def op(client: Client) -> tuple[dict[str, Any], bytes | None]:
                channel = supervisor.raw_channel
                if channel is None or is_modern(client):  # restarted (or into the stateless era) since the plan
                    meta = hub.relay.downstream_meta(ctx)
                    with client_capabilities(hub.relayed_capabilities(ctx)):
                        result = await client.call_tool(params["name"], params.get("arguments"), meta=meta)
                    return _dump(result), None
                return await channel.request_text(_TOOLS_CALL, params)

            slow: tuple[dict[str, Any], bytes | None] | None = None  # stays None when the policy's deadline expires
            with admission.deadline():
                slow = await supervisor.request(op)
            return slow

    def _released(
        self, server: str, admission: Admission, raw: Any, text: bytes | None
    ) -> tuple[dict[str, Any], bytes | None]:
        """The answer as the client may see it: checked, unstamped, and through the policy's result filter when it
        could need redacting or capping (else the downstream's own bytes)."""
        hub = self._hub
        problem = _malformed(raw)
        if problem is not None:
            logger.warning("server %s answered tools/call with an invalid result: %s", server, problem)
            return _error_result(f"server {server!r} answered with an invalid tools/call result: {problem}"), None
        self.fast_calls += 1
        unstamped = _unstamped(raw)
        if unstamped is not raw:
            raw, text = unstamped, None
        cap = admission.decision.max_result_bytes
        redactor = hub.guard.redactor
        if (redactor is None or redactor.empty) and cap is not None and _within(raw, text, cap):
            passed: dict[str, Any] = raw
            return passed, text  # nothing to redact, nothing to cap: the bytes pass as they came
        try:
            typed = types.CallToolResult.model_validate(raw, by_name=False)
        except ValueError as exc:
            reason = str(exc).splitlines()[0]
            return _error_result(f"server {server!r} answered with an invalid tools/call result: {reason}"), None
        return _dump(hub.guard.release(admission, typed)), None


_COMPLETE = b',"resultType":"complete"}'
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def _response_line(request_id: types.RequestId, result: dict[str, Any], text: bytes | None) -> bytes:
    """The JSON-RPC response line: the downstream's result text spliced in when it passes unchanged."""
    if text is None:
        body = {"jsonrpc": "2.0", "id": request_id, "result": result}
        return _ENCODER.encode(body).encode("ascii") + b"\n"
    return b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode("ascii") + b',"result":' + text + b"}\n"
