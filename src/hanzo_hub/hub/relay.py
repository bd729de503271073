"""Relay of what flows from downstream servers back to clients: sampling, elicitation, roots, logging, updates.

A downstream request (``sampling/createMessage``, ``elicitation/create``, ``roots/list``) is answered by the client
whose call caused it. Which call that is: the call whose task runs the callback (2026-07-28 downstreams embed their
requests in ``InputRequiredResult``s that the downstream client drives inside the call's own task, found through a
context variable), else the latest call in flight to that server (2025-11-25 downstreams send standalone requests,
which stdio cannot tie to a call). The answer goes to the client over its session, tied to its request so it rides
the right HTTP stream. A client that cannot answer (it lacks the capability, or no call is in flight) gets the
downstream a clear error instead.

Sampling may instead be answered by the hub's own router (``llm.sampling``): ``client`` always asks the client,
``router`` never does, ``client_then_router`` (the default) asks the client when it can answer and the router
otherwise. The router's answer is billed to the user whose call caused the request.

With secrets in the vault, every string of a downstream's sampling and elicitation requests and log messages is
redacted (``[redacted:NAME]``) before a client or the router sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.client.session import ClientRequestContext
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from hanzo_hub.hub.connections import session_connection
from hanzo_hub.hub.identity import current_user
from hanzo_hub.hub.notify import ChangeNotifier
from hanzo_hub.sandbox.vault import redacted_model

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)

RELAY_TIMEOUT = 300.0
"""Bound on waiting for a client to answer a relayed request (a person may be answering an elicitation)."""
NOTIFY_TIMEOUT = 2.0


@dataclass(eq=False)
class UpstreamCall:
    """A client request being served by a downstream server."""

    server: str
    ctx: ServerRequestContext[Any, Any]
    asker: Asker | None = None
    """For a stateless-era client over a handshake-era server: hands requests to the era bridge."""
    user: str | None = None
    """Who made the call (for sampling answered by the router)."""

    @property
    def modern(self) -> bool:
        """Whether the client speaks the stateless era (no server-to-client requests)."""
        return self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


_LEVEL_KEY = "hanzo_hub.log_level"
_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

_current: ContextVar[UpstreamCall | None] = ContextVar("hanzo_hub_upstream_call", default=None)


SamplingAnswer = types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData
Sampler = Callable[[str, types.CreateMessageRequestParams, str], Awaitable[SamplingAnswer | None]]
"""``(server, params, user) -> answer``: the hub's router answering a sampling request (``None``: it cannot)."""


class Relay:
    """Routes downstream requests and notifications to the right client."""

    def __init__(
        self,
        notifier: ChangeNotifier,
        *,
        user: str = "local",
        sampling: str = "client",
        sampler: Sampler | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self._notifier = notifier
        self.redact = redact
        """Applied to everything a downstream sends a client or the router (``None``: the vault is empty)."""
        self._user = user
        self.sampling = sampling
        self.sampler = sampler
        self._calls: dict[str, list[UpstreamCall]] = {}
        self.log_level: types.LoggingLevel | None = None
        # Keyed by the client's connection: the SDK builds a ServerSession per request, the connection lives as
        # long as the client and unwinds its exit stack when it goes.
        self._subscribers: dict[str, dict[Any, ServerSession | None]] = {}

    # -- log levels ---------------------------------------------------------------------------------------------

    def set_level(self, session: ServerSession | None, level: types.LoggingLevel) -> None:
        """A handshake-era client chose its log level (``logging/setLevel``)."""
        self.log_level = level
        if session is not None:
            session_connection(session).state[_LEVEL_KEY] = level

    def downstream_meta(self, ctx: ServerRequestContext[Any, Any] | None) -> types.RequestParamsMeta | None:
        """Request ``_meta`` for a downstream call: the log level to opt in to (stateless-era downstreams).

        A stateless-era client's own opt-in is forwarded; a handshake-era client's ``logging/setLevel`` choice
        becomes the opt-in (``info`` when it chose none, as a 2025-11-25 server would log unasked).
        """
        if ctx is None:
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            requested = ((ctx.params or {}).get("_meta") or {}).get(LOG_LEVEL_META_KEY)
            return cast(types.RequestParamsMeta, {LOG_LEVEL_META_KEY: requested}) if requested else None
        level = session_connection(ctx.session).state.get(_LEVEL_KEY) or self.log_level or "info"
        return cast(types.RequestParamsMeta, {LOG_LEVEL_META_KEY: level})

    def upstream_capabilities(self, ctx: ServerRequestContext[Any, Any] | None) -> dict[str, Any] | None:
        """The capabilities the client of ``ctx`` declared, in wire form, to show the downstream instead of ours."""
        if ctx is None:
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            declared = ((ctx.params or {}).get("_meta") or {}).get(CLIENT_CAPABILITIES_META_KEY)
            return declared if isinstance(declared, dict) else {}
        client_params = ctx.session.client_params
        if client_params is None:
            return None
        return client_params.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)

    # -- calls in flight ----------------------------------------------------------------------------------------

    @contextmanager
    def calling(
        self, server: str, ctx: ServerRequestContext[Any, Any], asker: Asker | None = None
    ) -> Iterator[UpstreamCall]:
        """Mark a client request as in flight on ``server`` for the duration of the block."""
        call = UpstreamCall(server, ctx, asker, current_user(self._user))
        calls = self._calls.setdefault(server, [])
        calls.append(call)
        token = _current.set(call)
        try:
            yield call
        finally:
            _current.reset(token)
            calls.remove(call)

    def upstream_for(self, server: str) -> UpstreamCall | None:
        """The client request a downstream request of ``server`` belongs to, if any."""
        call = _current.get()
        if call is not None and call.server == server:
            return call
        calls = self._calls.get(server)
        return calls[-1] if calls else None

    # -- downstream callbacks -----------------------------------------------------------------------------------

    def client_options(self, server: str) -> dict[str, Any]:
        """``mcp.Client`` callbacks for ``server``: they relay its requests and logs to the right client."""

        async def sampling(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> SamplingAnswer:
            params = redacted_model(params, self.redact)  # a model, the client's or the router's, reads these
            if self.sampler is not None and self._router_samples(server):
                call = self.upstream_for(server)
                user = call.user if call is not None and call.user else current_user(self._user)
                answer = await self.sampler(server, params, user)
                if answer is not None:  # None: the router has no provider; the client's refusal stands
                    return answer
            request = types.CreateMessageRequest(params=params)
            if params.tools:
                return await self._ask(server, "sampling", request, types.CreateMessageResultWithTools)
            return await self._ask(server, "sampling", request, types.CreateMessageResult)

        async def elicitation(
            context: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult | types.ErrorData:
            params = redacted_model(params, self.redact)
            return await self._ask(server, "elicitation", types.ElicitRequest(params=params), types.ElicitResult)

        async def roots(context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
            return await self._ask(server, "roots", types.ListRootsRequest(), types.ListRootsResult)

        async def log(params: types.LoggingMessageNotificationParams) -> None:
            await self._log(server, redacted_model(params, self.redact))

        return {
            "sampling_callback": sampling,
            "elicitation_callback": elicitation,
            "list_roots_callback": roots,
            "logging_callback": log,
        }

    def _router_samples(self, server: str) -> bool:
        """Whether the router (not the client) answers ``server``'s sampling request now."""
        if self.sampling == "router":
            return True
        return self.sampling == "client_then_router" and not self.can_answer(server, "sampling")

    def can_answer(self, server: str, capability: str) -> bool:
        """Whether the client a request of ``server`` belongs to can answer ``capability`` (as ``_ask`` decides)."""
        call = self.upstream_for(server)
        if call is None:
            return False
        if call.modern:
            declared = self.upstream_capabilities(call.ctx) or {}
            return capability in declared and call.asker is not None
        return _supports(call.ctx.session, capability)

    async def _ask(self, server: str, capability: str, request: Any, result_type: type[R]) -> R | types.ErrorData:
        call = self.upstream_for(server)
        if call is None:
            session = self._notifier.any_session(capability) if capability == "roots" else None
            if session is None:
                return types.ErrorData(
                    code=types.INVALID_REQUEST,
                    message=f"hanzo-hub: no client request is in flight to answer {capability} for server '{server}'",
                )
            return await self._send(session, None, request, result_type)
        if call.modern:
            declared = self.upstream_capabilities(call.ctx) or {}
            if capability not in declared:
                return types.ErrorData(
                    code=types.INVALID_REQUEST, message=f"hanzo-hub: the client does not support {capability}"
                )
        if call.modern and call.asker is not None:
            answer = await call.asker.ask(capability, request)
            return answer if isinstance(answer, result_type | types.ErrorData) else _mismatch(capability)
        if call.modern:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"hanzo-hub: the client speaks 2026-07-28 and cannot answer {capability} requests of "
                f"server '{server}', which speaks 2025-11-25",
            )
        if not _supports(call.ctx.session, capability):
            return types.ErrorData(
                code=types.INVALID_REQUEST, message=f"hanzo-hub: the client does not support {capability}"
            )
        return await self._send(call.ctx.session, call.ctx.request_id, request, result_type)

    async def _send(
        self, session: ServerSession, related: types.RequestId | None, request: Any, result_type: type[R]
    ) -> R | types.ErrorData:
        metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
        try:
            with anyio.fail_after(RELAY_TIMEOUT):
                return await session.send_request(request, result_type, metadata=metadata)
        except MCPError as exc:
            return exc.error
        except TimeoutError:
            return types.ErrorData(code=types.INTERNAL_ERROR, message="hanzo-hub: the client did not answer in time")

    async def _log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """A downstream log message goes to the client whose call it belongs to, else to every connected client.

        Levels are honoured as each era defines them: a handshake-era client's ``logging/setLevel`` choice, a
        stateless-era client's per-request opt-in (without one, nothing is sent).
        """
        call = self.upstream_for(server)
        targets: list[tuple[ServerSession, types.RequestId | None]]
        if call is not None:
            if call.modern and not _at_least(params.level, _requested_level(call.ctx)):
                return
            targets = [(call.ctx.session, call.ctx.request_id)]
        else:
            targets = [(s, None) for s in self._notifier.sessions()]
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(
                level=params.level, data=params.data, logger=params.logger or server
            )
        )
        for session, related in targets:
            legacy = call is None or not call.modern
            if legacy and not _at_least(params.level, session_connection(session).state.get(_LEVEL_KEY)):
                continue
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT):
                    await session.send_notification(notification, related_request_id=related)
            except Exception:  # a gone client must not break the downstream's connection
                logger.debug("could not relay a log message of server %s", server, exc_info=True)

    # -- resource subscriptions ---------------------------------------------------------------------------------

    def subscribe(self, exposed_uri: str, session: ServerSession) -> bool:
        """Record a client's subscription; returns whether it is the first for that URI."""
        subscribers = self._subscribers.setdefault(exposed_uri, {})
        first = not subscribers
        connection = session_connection(session)
        if connection not in subscribers:
            connection.exit_stack.callback(self._forget, exposed_uri, connection)
        subscribers[connection] = session
        return first

    def subscribe_stream(self, exposed_uri: str, key: object) -> bool:
        """A stateless-era ``subscriptions/listen`` stream asks for ``exposed_uri``; returns whether it is the first.

        Its updates arrive through the subscription bus, so no session is kept for it.
        """
        subscribers = self._subscribers.setdefault(exposed_uri, {})
        first = not subscribers
        subscribers[key] = None
        return first

    def _forget(self, exposed_uri: str, connection: Any) -> None:
        subscribers = self._subscribers.get(exposed_uri)
        if subscribers is not None:
            subscribers.pop(connection, None)

    def unsubscribe(self, exposed_uri: str, session: ServerSession | object) -> bool:
        """Forget a client's (or a listen stream's) subscription; returns whether nobody is subscribed any more."""
        subscribers = self._subscribers.get(exposed_uri)
        if subscribers is None:
            return False
        subscribers.pop(session_connection(session) if isinstance(session, ServerSession) else session, None)
        if subscribers:
            return False
        del self._subscribers[exposed_uri]
        return True

    def subscribed(self) -> list[str]:
        """Every exposed URI some client is subscribed to."""
        return [uri for uri, sessions in self._subscribers.items() if sessions]

    async def resource_updated(self, exposed_uri: str) -> None:
        """Tell subscribers of both eras that a resource changed."""
        await self._notifier.bus.publish(ResourceUpdated(uri=exposed_uri))
        for connection, session in list(self._subscribers.get(exposed_uri, {}).items()):
            if session is None:  # a listen stream: the bus above delivered it
                continue
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT):
                    await session.send_resource_updated(exposed_uri)
            except Exception:  # a gone client is dropped, the others still hear
                self._forget(exposed_uri, connection)


def _requested_level(ctx: ServerRequestContext[Any, Any]) -> str:
    """A stateless-era request's log-level opt-in; ``"none"`` when it opted out (nothing passes)."""
    requested = ((ctx.params or {}).get("_meta") or {}).get(LOG_LEVEL_META_KEY)
    return requested if requested in _LEVELS else "none"


def _at_least(level: str, threshold: str | None) -> bool:
    if threshold is None:
        return True
    if threshold not in _LEVELS:
        return False
    return level in _LEVELS and _LEVELS.index(level) >= _LEVELS.index(threshold)


class Asker(Protocol):
    """Takes a downstream request to a client that answers in a later round (the era bridge)."""

    async def ask(self, kind: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """The client's answer."""
        ...


def _mismatch(capability: str) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_PARAMS, message=f"hanzo-hub: the client's {capability} answer is malformed"
    )


def _supports(session: ServerSession, capability: str) -> bool:
    wanted = {
        "sampling": types.ClientCapabilities(sampling=types.SamplingCapability()),
        "elicitation": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
        "roots": types.ClientCapabilities(roots=types.RootsCapability()),
    }[capability]
    try:
        return session.check_client_capability(wanted)
    except Exception:  # capability introspection must never break a relay; assume the client can answer
        return True
