"""The era bridge: a stateless-era (2026-07-28) client calling a tool of a handshake-era (2025-11-25) server.

Such a server asks for sampling, elicitation or roots with standalone requests while its call runs, but the
client cannot take requests: it expects an ``InputRequiredResult`` and retries the call with the answers. So the
downstream call runs in a task the hub owns (``Parked``), its requests are collected, and the client gets them as
``inputRequests`` with an unguessable ``requestState`` naming the parked call. The retry delivers the answers to the
waiting downstream requests and waits again, until the call completes. Parked calls are bounded by the server's call
timeout and expire if the client never comes back.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import MCPError
from mcp.shared.dispatcher import ProgressFnT

from hanzo_hub.hub.downstream_requests import is_modern

logger = logging.getLogger(__name__)

PARK_TTL = 300.0
"""How long a parked call waits for the client to come back with answers."""


@dataclass(eq=False)
class _Exchange:
    key: str
    request: types.InputRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    response: types.InputResponse | types.ErrorData | None = None


@dataclass(eq=False)
class Parked:
    """One downstream call running on behalf of a stateless-era client."""

    tool: str
    changed: anyio.Event = field(default_factory=anyio.Event)
    done: bool = False
    result: types.CallToolResult | None = None
    error: BaseException | None = None
    pending: dict[str, _Exchange] = field(default_factory=dict)
    counter: int = 0
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    progress: ProgressFnT | None = None
    """Where the downstream's progress goes: the current round of the client's request."""

    def _wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def ask(self, kind: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """Called by the relay for a downstream request: hand it to the client, wait for its answer."""
        self.counter += 1
        exchange = _Exchange(f"{kind}-{self.counter}", request)
        self.pending[exchange.key] = exchange
        self._wake()
        with anyio.move_on_after(PARK_TTL):
            await exchange.answered.wait()
        self.pending.pop(exchange.key, None)
        if exchange.response is None:
            return types.ErrorData(code=types.INTERNAL_ERROR, message="hanzo-hub: the client never answered")
        return exchange.response


class EraBridge:
    """Runs tool calls for stateless-era clients against handshake-era servers."""

    def __init__(self) -> None:
        self._parked: dict[str, Parked] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    def bind(self, task_group: anyio.abc.TaskGroup | None) -> None:
        """The task group parked calls run in (the hub's)."""
        self._tg = task_group

    async def call_tool(
        self,
        pool: Any,
        server: str,
        calling: Callable[[Parked], AbstractContextManager[Any]],
        tool: str,
        arguments: dict[str, Any] | None,
        params: types.CallToolRequestParams | None,
        meta: types.RequestParamsMeta | None,
        progress: ProgressFnT | None,
    ) -> types.CallToolResult | types.InputRequiredResult | None:
        """A stateless-era client's call of ``tool`` on a handshake-era ``server`` (of the backend ``pool``), through
        the bridge; ``None`` when the server speaks the stateless era itself. ``calling(parked)`` marks the downstream
        requests made meanwhile as this call's (the hub's relay).

        Progress goes to whichever round of the client's request is current (``parked.progress``).

        Raises:
            BackendError: the server cannot be started, or the parked call failed.
        """
        supervisor = pool.get(server)
        if params is not None and params.request_state and self.knows(params.request_state):
            return await self.settle(self.resume(tool, params, progress))
        if is_modern(await supervisor.ensure()):
            return None

        async def run(parked: Parked) -> types.CallToolResult:
            async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
                if parked.progress is not None:
                    with contextlib.suppress(Exception):  # a finished round cannot take progress any more
                        await parked.progress(progress, total, message)

            with calling(parked):
                result: types.CallToolResult = await supervisor.request(
                    lambda c: c.call_tool(tool, arguments, progress_callback=relay_progress, meta=meta)
                )
                return result

        return await self.settle(self.start(tool, run, progress))

    def start(
        self, tool: str, run: Callable[[Parked], Awaitable[types.CallToolResult]], progress: ProgressFnT | None = None
    ) -> Parked:
        """Start a downstream call in the background; ``run`` receives the parked call (its ``ask`` relays)."""
        if self._tg is None:  # before Hub.run() or after its task group closed (shutting down)
            raise MCPError(
                types.INTERNAL_ERROR, f"hanzo-hub is not serving calls now (shutting down); {tool} was not called"
            )
        parked = Parked(tool, progress=progress)

        async def drive() -> None:
            with parked.scope:
                try:
                    parked.result = await run(parked)
                except Exception as exc:  # task boundary: the error goes to the client's next round
                    parked.error = exc
            parked.done = True
            parked._wake()

        self._tg.start_soon(drive)
        return parked

    def knows(self, request_state: str) -> bool:
        """Whether ``request_state`` names a call parked here (else it is a downstream's own state)."""
        return request_state in self._parked

    def holds(self, request_state: str | None, tool: str) -> bool:
        """Whether ``request_state`` names a call of ``tool`` parked here."""
        parked = self._parked.get(request_state or "")
        return parked is not None and parked.tool == tool

    def resume(self, tool: str, params: types.CallToolRequestParams, progress: ProgressFnT | None = None) -> Parked:
        """The parked call a retry names, with the client's answers delivered to its waiting requests.

        Raises:
            MCPError: the request state names no parked call of that tool (unknown, expired or tampered with).
        """
        parked = self._parked.pop(params.request_state or "", None)
        if parked is None or parked.tool != tool:
            raise MCPError(types.INVALID_PARAMS, "hanzo-hub: unknown or expired requestState")
        parked.progress = progress
        for key, response in (params.input_responses or {}).items():
            exchange = parked.pending.get(key)
            if exchange is not None and exchange.response is None:
                exchange.response = response
                exchange.answered.set()
        return parked

    async def settle(self, parked: Parked) -> types.CallToolResult | types.InputRequiredResult:
        """Wait until the call completes or asks something the client has not answered yet.

        Raises:
            BaseException: whatever the downstream call raised.
        """
        while True:
            if parked.done:
                if parked.error is not None:
                    raise parked.error
                assert parked.result is not None
                return parked.result
            unanswered = {k: e.request for k, e in parked.pending.items() if e.response is None}
            if unanswered:
                return self._park(parked, unanswered)
            await parked.changed.wait()

    def _park(self, parked: Parked, requests: dict[str, types.InputRequest]) -> types.InputRequiredResult:
        if self._tg is None:
            raise MCPError(
                types.INTERNAL_ERROR, "hanzo-hub is shutting down; the call cannot wait for the client's answer"
            )
        token = secrets.token_urlsafe(24)
        self._parked[token] = parked
        self._tg.start_soon(self._expire, token, parked)
        return types.InputRequiredResult(input_requests=requests, request_state=token)

    async def _expire(self, token: str, parked: Parked) -> None:
        await anyio.sleep(PARK_TTL)
        if self._parked.get(token) is parked:
            del self._parked[token]
            parked.scope.cancel()
            logger.info("a parked call of tool %s expired: the client never answered", parked.tool)
