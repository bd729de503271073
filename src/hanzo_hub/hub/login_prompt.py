"""Logging in from the client: a remote server that needs OAuth authorization asks the calling client's user.

When a call fails because its remote server needs an OAuth login the hub does not hold (``AuthorizationRequired``
while starting it), and the calling client supports URL-mode elicitation (MCP 2025-11-25: a server sends the user
to a URL for an out-of-band step such as an OAuth flow), the hub runs the same login as ``hanzo-hub auth login``
(``hub/oauth_login.py``) with the client as the browser: the authorization URL goes to the client in an
``elicitation/create`` request (``mode: url``), the user approves it in their browser, the authorization server
redirects to the hub's loopback callback, the tokens go to the vault, the client hears
``notifications/elicitation/complete``, and the call is retried once. A client that cannot show URLs, a user who
declines, or a login that does not finish in time leaves the call's error as it was, with the reason added.

Both eras get the login tool of a server never logged in (``<server>__login``) and have a call to a listed server
whose login was lost mended in place: a handshake-era client over its session (the URL goes out during the call,
which is then retried), a stateless-era client (2026-07-28) through an ``InputRequiredResult`` round. For the
latter the era bridge parks the login under a key of the server and tool; the client's retry, carrying the user's
answer, waits for the login and then makes the call afresh. All of it only where ``backends.oauth_prompt`` is on
(the default). One login per server runs at a time; a call that arrives while one runs waits for it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hanzo_hub.backends.listing import Listing
from hanzo_hub.config import HttpServerSpec, SseServerSpec
from hanzo_hub.errors import AuthorizationFailed, BackendError, BackendUnavailable, HubError
from hanzo_hub.hub.bridge import Parked
from hanzo_hub.hub.oauth_login import login

if TYPE_CHECKING:
    from hanzo_hub.hub.core import Hub

__all__ = ["LOGIN_TOOL", "LoginPrompt", "mend_key"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOGIN_SECONDS = 300.0
"""How long the user has to approve (the call's own deadline may end it sooner)."""


LOGIN_TOOL = "login"
_PLACEHOLDER_INFO = {"name": "hanzo-hub login placeholder", "version": "0"}


def _placeholder(server: str) -> Listing:
    tool = types.Tool(
        name=LOGIN_TOOL,
        description=(
            f"The server '{server}' needs you to authorize hanzo-hub (OAuth) before its tools can be listed. Call "
            f"this to open its authorization page (or run `hanzo-hub auth login {server}` in a terminal)."
        ),
        input_schema={"type": "object", "properties": {}},
    )
    return Listing(tools=(tool,), server_info=_PLACEHOLDER_INFO, source="snapshot")


def mend_key(server: str, tool: str) -> str:
    """The era bridge's name for a stateless-era call to ``tool`` of ``server`` that waits for a login."""
    return f"{server}\x00{tool}\x00{LOGIN_TOOL}"


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _shows_urls(ctx: ServerRequestContext[Any, Any] | None) -> bool:
    """Whether the client of ``ctx`` declared URL-mode elicitation: on its session (2025-11-25), or in the request's
    ``_meta`` (2026-07-28, where capabilities travel with each request)."""
    if ctx is None:
        return False
    if _modern(ctx):
        params = ctx.params if isinstance(ctx.params, dict) else {}
        declared = (params.get("_meta") or {}).get(CLIENT_CAPABILITIES_META_KEY)
        elicitation = declared.get("elicitation") if isinstance(declared, dict) else None
        return isinstance(elicitation, dict) and "url" in elicitation
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.elicitation and capabilities.elicitation.url is not None)


class LoginPrompt:
    """Per hub: which servers have a login running, and the login itself."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        self._locks: dict[str, anyio.Lock] = {}

    def offer(self, server: str) -> None:
        """``server`` needs a login and has no listing yet (never started, no snapshot): list one tool in its place,
        ``<server>__login``, that runs the login. Its real listing replaces it once the server starts."""
        hub = self._hub
        if server in hub.registry.listings and not self.is_placeholder(server):
            return  # a snapshot keeps the server's tools listed; calling one asks for the login (mend)
        hub.registry.set(server, _placeholder(server))
        hub.background_once(hub.notifier.changed, {"tools"})

    def is_placeholder(self, server: str) -> bool:
        listing = self._hub.registry.listings.get(server)
        return listing is not None and listing.server_info == _PLACEHOLDER_INFO

    async def login_tool(
        self,
        server: str,
        ctx: ServerRequestContext[Any, Any] | None,
        params: types.CallToolRequestParams | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """What calling ``<server>__login`` does: log in through the client, start the server, list its tools.

        A stateless-era client cannot take a request during its call, so for it the login runs as a call parked in
        the era bridge (``hub/bridge.py``): the authorization URL reaches the client as an ``InputRequiredResult``
        holding a URL-mode elicitation, and the client's retry (after the user approved) waits for the login.
        """
        bridge, key = self._hub.bridge, f"{server}\x00{LOGIN_TOOL}"
        state = params.request_state if params is not None else None
        if ctx is not None and _modern(ctx) and params is not None and state and bridge.knows(state):
            return await bridge.settle(bridge.resume(key, params))
        if ctx is None or not _shows_urls(ctx):
            return _error(
                f"The server '{server}' needs an OAuth login, and this client cannot open an authorization page for "
                f"the hub: run `hanzo-hub auth login {server}` in a terminal."
            )
        if _modern(ctx):

            async def parked_login(parked: Parked) -> types.CallToolResult:
                async def through_client(url: str) -> None:
                    request = types.ElicitRequest(params=types.ElicitRequestURLParams(message=_ask(server), url=url))
                    _accepted(await parked.ask("elicitation", request))

                return await self._logged_in(server, await self._login(server, through_client, None))

            return await bridge.settle(bridge.start(key, parked_login))
        return await self._logged_in(server, await self.run(server, ctx))

    async def _logged_in(self, server: str, why: str | None) -> types.CallToolResult:
        """The login tool's answer once the login ended (``why``: how it failed, or ``None``)."""
        if why is not None:
            return _error(f"The login to server '{server}' failed: {why}")
        try:
            await self._hub.pool.get(server).ensure()  # its live listing replaces this tool; clients hear of it
        except HubError as exc:
            return _error(f"Logged in, but the server '{server}' did not start: {exc}")
        tools = len(self._hub.registry.listings[server].tools) if server in self._hub.registry.listings else 0
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"Logged in to '{server}'; its {tools} tools are listed now.")]
        )

    def applies(self, server: str, ctx: ServerRequestContext[Any, Any] | None) -> bool:
        """Whether a failed call to ``server`` from ``ctx`` may be mended by a login through the client."""
        hub = self._hub
        if not hub.settings.backends.oauth_prompt or ctx is None or not _shows_urls(ctx):
            return False
        spec = hub.servers.get(server)
        supervisor = hub.pool.supervisors.get(server)
        return isinstance(spec, HttpServerSpec | SseServerSpec) and supervisor is not None and supervisor.needs_login

    async def mend(
        self,
        server: str,
        tool: str,
        ctx: ServerRequestContext[Any, Any] | None,
        failure: BackendError,
        retry: Callable[[], Awaitable[T]],
    ) -> T | types.CallToolResult | types.InputRequiredResult:
        """Log in through the client when that may mend ``failure``, then ``retry`` the call once.

        A stateless-era client gets the login as an ``InputRequiredResult`` instead (parked under
        :func:`mend_key`); its retry goes through :meth:`resume_mend`, then makes the call.

        Raises:
            BackendError: ``failure`` when no login applies; with the login's reason added when it failed; or what
                the retry raised.
        """
        if ctx is None or not self.applies(server, ctx):
            raise failure
        if _modern(ctx):
            return await self._park_mend(server, tool, failure)
        why = await self.run(server, ctx)
        if why is not None:
            raise _failed(server, failure, why)
        return await retry()

    async def _park_mend(
        self, server: str, tool: str, failure: BackendError
    ) -> types.CallToolResult | types.InputRequiredResult:
        bridge = self._hub.bridge

        async def parked_login(parked: Parked) -> types.CallToolResult:
            async def through_client(url: str) -> None:
                request = types.ElicitRequest(params=types.ElicitRequestURLParams(message=_ask(server), url=url))
                _accepted(await parked.ask("elicitation", request))

            why = await self._login(server, through_client, None)
            if why is not None:
                return _error(str(_failed(server, failure, why)))
            return types.CallToolResult(content=[types.TextContent(type="text", text="logged in")])

        return await bridge.settle(bridge.start(mend_key(server, tool), parked_login))

    async def resume_mend(
        self, server: str, tool: str, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | None:
        """A stateless-era client's retry of a call that waits for a login: ``None`` once the login worked (make the
        call now), else what to answer (the login's failure, or another round)."""
        bridge = self._hub.bridge
        outcome = await bridge.settle(bridge.resume(mend_key(server, tool), params))
        if isinstance(outcome, types.CallToolResult) and not outcome.is_error:
            return None
        return outcome

    async def run(self, server: str, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """Log in to ``server`` through the (handshake-era) client of ``ctx``; ``None`` when it worked (retry the
        call), else why not."""
        elicitation_id = secrets.token_urlsafe(12)

        async def through_client(url: str) -> None:
            message = _ask(server)
            _accepted(await ctx.session.elicit_url(message, url, elicitation_id, related_request_id=ctx.request_id))

        async def complete() -> None:
            await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)

        return await self._login(server, through_client, complete)

    async def _login(
        self, server: str, open_url: Callable[[str], Awaitable[None]], complete: Callable[[], Awaitable[None]] | None
    ) -> str | None:
        """Log in to ``server`` with ``open_url`` as the browser; ``None`` when it worked, else why not.

        A call that finds another login to the same server running waits for it, then retries without a second one.
        """
        lock = self._locks.setdefault(server, anyio.Lock())
        supervisor = self._hub.pool.get(server)
        async with lock:
            if not supervisor.needs_login:  # a login that ran while this call waited mended it
                return None
            try:
                settings = self._hub.settings
                await login(settings, server, open_url=open_url, notify=logger.info, timeout=LOGIN_SECONDS)
            except HubError as exc:
                logger.warning("OAuth login to server %s through the client failed: %s", server, exc)
                return str(exc)
            supervisor.forgive()
            if complete is not None:
                try:
                    await complete()
                except Exception:  # the notice is a courtesy; the login worked either way
                    logger.debug("elicitation/complete could not be sent", exc_info=True)
            logger.info("server %s: logged in through the client", server)
            return None


def _failed(server: str, failure: BackendError, why: str) -> BackendUnavailable:
    return BackendUnavailable(server, f"{failure.reason}; the login through the client failed: {why}")


def _ask(server: str) -> str:
    return f"hanzo-hub needs you to authorize it with the server '{server}' (OAuth)."


def _accepted(answer: Any) -> None:
    """Raise unless the client's answer to the URL elicitation is "accept"."""
    action = getattr(answer, "action", None)
    if action != "accept":
        why = action or getattr(answer, "message", None) or "no answer"
        raise AuthorizationFailed(f"the user did not open the authorization page ({why})")
