"""One downstream server's life: lazy start, bounded handshake, crash detection, backoff and a circuit breaker.

States move ``STOPPED → STARTING → RUNNING → STOPPING → STOPPED``; a stop requested while it starts (installing,
queued for a slot, handshaking) ends the start. The connection lives in a task of the pool's task group (``_run``),
which never raises: every failure is recorded here and surfaces as a ``BackendError`` to the caller that wanted the
server, never as a crash of the hub. Restarts are demand-driven: the next request after a crash
starts the server again once its backoff has passed; after ``breaker_threshold`` consecutive failures the
circuit opens and requests fail fast until ``breaker_cooldown`` has passed.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from mcp import Client, MCPError
from mcp.server import MCPServer, Server
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from hanzo_hub.backends.base import ConnectContext, build_target, watched
from hanzo_hub.backends.broken_answers import answer_to_junk
from hanzo_hub.backends.change_stream import ChangeStream
from hanzo_hub.backends.failures import (
    Backoff,
    StderrTail,
    describe_failure,
    innermost,
    invalid_answer,
    login_refusal,
    needs_login,
)
from hanzo_hub.backends.listing import Listing, discover_pinned, fetch_listing
from hanzo_hub.backends.metrics import NO_METRICS, ServerMetrics
from hanzo_hub.backends.rawchannel import RawChannel
from hanzo_hub.backends.snapshot import file_key
from hanzo_hub.backends.supervisor_ports import Slots, SupervisorHooks
from hanzo_hub.config import BackendSettings, ServerSpec
from hanzo_hub.errors import BackendCrashed, BackendTimeout, BackendUnavailable, HubError

logger = logging.getLogger(__name__)

T = TypeVar("T")

STOP_GRACE = 5.0
"""Extra time, beyond the SDK's own bounded process shutdown, to wait for a connection task to end."""


class State(enum.Enum):
    """Where a server is in its life."""

    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"  # told to stop; takes no new requests, still counts against the cap until it has ended


@dataclass
class _Attempt:
    ready: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None
    connected: bool = False


class Supervisor:
    """Owns the connection to one downstream server."""

    def __init__(
        self,
        name: str,
        spec: ServerSpec,
        settings: BackendSettings,
        context: ConnectContext,
        hooks: SupervisorHooks,
        slots: Slots,
        task_group: anyio.abc.TaskGroup,
        clock: Callable[[], float] = time.monotonic,
        metrics: ServerMetrics = NO_METRICS,
    ) -> None:
        self.name = name
        self.metrics = metrics
        self.spec = spec
        self._settings = settings
        self._context = context
        self._hooks = hooks
        self._slots = slots
        self._tg = task_group
        self._clock = clock
        self.state = State.STOPPED
        self._client: Client | None = None
        self._changed = anyio.Event()
        self._stop = anyio.Event()
        self._ended = anyio.Event()
        self._channel: RawChannel | None = None
        self.in_flight = 0
        """Requests being served, or waiting for this server to start for them: the cap and the idle reaper only
        stop a server at zero, so one started for waiting callers is not evicted before they have used it."""
        self.retired = False
        """Removed from the pool (a reloaded config): it never starts again."""
        self.needs_login = False
        """Its last start failed for want of an OAuth login (``hub/login_prompt.py`` may get one)."""
        self._end_reason: str | None = None
        """Why the hub ended the last connection, when the hub's own error did (requests lost with it say so)."""
        self.last_used = 0.0
        self.backoff = Backoff(name, settings, clock)
        self._preparing = False  # an install (prepare_start hook) or a queue for a slot: waiters wait it out
        self.start_cost = 0.0
        """Seconds its last successful start took (spawn to ready): the cap keeps it at least this long idle."""
        self.starts = 0
        self.junk_lines = 0
        self._finished = 0
        """Requests finished, on any connection (see ``ChangeStream``)."""
        self._stderr = StderrTail(self.log_path, enabled=spec.kind == "stdio")
        self._changes = ChangeStream(
            name,
            lambda: self._hooks.resource_subscriptions(self.name),
            self._on_event,
            lambda: (self._finished, self.in_flight),
            self._refresh_soon,
        )

    # -- public API ---------------------------------------------------------------------------------------------

    @property
    def call_timeout(self) -> float:
        """The deadline of one request to this server."""
        return self.spec.call_timeout or self._settings.call_timeout

    @property
    def failures(self) -> int:
        """Failures in a row (0 once a start or a request succeeds)."""
        return self.backoff.failures

    @property
    def last_error(self) -> str | None:
        """Why the last start or request failed, if one did."""
        return self.backoff.last_error

    @property
    def client(self) -> Client | None:
        """The live client, if the server runs (not once it has been told to stop)."""
        return self._client if self.state is State.RUNNING else None

    @property
    def raw_channel(self) -> RawChannel | None:
        """Raw requests beside the live client's session (subprocess and remote servers), if the server runs."""
        channel = self._channel
        return channel if self._client is not None and channel is not None and channel.open else None

    @property
    def holding(self) -> bool:
        """Whether it holds state a stop would lose (the hub's memory server while sessions keep memories in it):
        the idle reaper and the running cap leave it running (optional hook ``holds_state``)."""
        holds = getattr(self._hooks, "holds_state", None)
        return bool(holds is not None and holds(self.name))

    @property
    def log_path(self) -> Path:
        """Where the server's stderr goes (stdio servers)."""
        return self._context.log_dir / f"{file_key(self.name)}.log"

    async def request(self, op: Callable[[Client], Awaitable[T]], timeout: float | None = None) -> T:
        """Run ``op`` against the live client, starting the server if needed, within bounded time.

        Raises:
            BackendUnavailable: the server cannot be started or its circuit is open.
            BackendTimeout: no answer within the deadline.
            BackendCrashed: the connection ended mid-request.
            BackendInvalidAnswer: the server's answer does not validate.
            BackendNeedsLogin: the server refused the request for want of a login (a step-up); the connection goes on.
            MCPError: the server answered with a protocol error (passed through).
        """
        return await self.metrics.timed(self._request(op, timeout or self.call_timeout))

    async def _request(self, op: Callable[[Client], Awaitable[T]], deadline: float) -> T:
        # ``use()`` inlined: this runs for every call, and a generator-based context manager costs more than the rest
        self.in_flight += 1
        try:
            client = self._client if self.state is State.RUNNING else None
            if client is None:
                client = await self.ensure()
            ended = self._ended  # this connection's, captured before a restart could replace it
            try:
                with anyio.fail_after(deadline):
                    result = await op(client)
            except TimeoutError:
                raise BackendTimeout(self.name, f"did not answer within {deadline:g} s") from None
            except MCPError as exc:
                if exc.code == types.CONNECTION_CLOSED:
                    raise await self._lost(ended, exc) from None
                raise login_refusal(self.name, exc) or exc from None
            except ValidationError as exc:  # the SDK's client read an answer that breaks the protocol
                raise invalid_answer(self.name, exc) from None
        finally:
            self._done()
        self.backoff.succeeded()
        return result

    async def raw_request(
        self, client: Client, method: str, params: dict[str, Any], timeout: float
    ) -> tuple[dict[str, Any], bytes | None] | None:
        """``method`` on the raw channel of the running ``client`` (see :mod:`.rawchannel`), within ``timeout`` s.

        ``None`` when ``client`` is no longer the live one or its channel is gone (a restart since the caller looked):
        the caller takes :meth:`request`. Same accounting as :meth:`request` (in flight, idle clock, crash detection),
        without its cancel scope: the channel's timer bounds the wait.

        Raises:
            TimeoutError: no answer within ``timeout`` (the server was told the request is cancelled).
            BackendCrashed: the connection ended mid-request.
            MCPError: the server answered with a protocol error (passed through).
        """
        channel = self._channel
        if self._client is not client or self.state is not State.RUNNING or channel is None or not channel.open:
            return None
        return await self.metrics.timed(self._raw_request(channel, method, params, timeout))

    async def _raw_request(
        self, channel: RawChannel, method: str, params: dict[str, Any], timeout: float
    ) -> tuple[dict[str, Any], bytes | None]:
        self.in_flight += 1
        ended = self._ended
        try:
            answer = await channel.request_text(method, params, timeout=timeout)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                raise await self._lost(ended, exc) from None
            raise login_refusal(self.name, exc) or exc from None
        finally:
            self._done()
        self.backoff.succeeded()
        return answer

    async def _lost(self, ended: anyio.Event, exc: MCPError) -> BackendCrashed:
        """The error for a request whose connection closed mid-request, once the connection task has recorded the
        loss (bounded), so the next request restarts the server instead of meeting the dead client. A streamable
        HTTP answer stream that broke off (the SDK's "SSE stream ..." errors) ended nothing else: the error now."""
        if self.spec.kind == "http" and exc.error.message.startswith("SSE stream"):
            await anyio.lowlevel.checkpoint()
            return BackendCrashed(self.name, f"broke off its answer ({exc.error.message})")
        with anyio.move_on_after(self._settings.shutdown_timeout + STOP_GRACE):
            await ended.wait()
        if self._end_reason:  # the hub ended it and knows why (a login the server refuses, a failed post)
            return BackendCrashed(self.name, self._end_reason)
        return BackendCrashed(self.name, f"closed its connection mid-request{self._stderr.hint()}")

    @asynccontextmanager
    async def use(self) -> AsyncIterator[Client]:
        """The live client, held as in flight (so the idle reaper and the cap leave it alone)."""
        self.in_flight += 1
        try:
            yield await self.ensure()
        finally:
            self._done()

    def _done(self) -> None:
        """A request in flight ended."""
        self.in_flight -= 1
        self._finished += 1
        self.last_used = self._clock()
        if self.in_flight == 0:
            self._slots.idle(self)

    async def ensure(self) -> Client:
        """Start the server unless it runs, and return its client.

        Raises:
            BackendUnavailable: it cannot be started, or its circuit is open.
        """
        while True:
            if self.retired:
                raise BackendUnavailable(self.name, "was removed from the configuration")
            if self.state is State.RUNNING and self._client is not None:
                return self._client
            if self.state is State.STARTING:
                if self._preparing:  # an install or a queue: bounded by their own timeouts, not by the handshake's
                    await self._changed.wait()
                    continue
                with anyio.fail_after(self._start_bound()):
                    await self._changed.wait()
                continue
            if self.state is State.STOPPING:  # let it end first: a fresh start must not race the old process
                ended = self._ended  # this process's: another caller may have started the next one by the time we wake
                with anyio.move_on_after(self._settings.shutdown_timeout + STOP_GRACE):
                    await ended.wait()
                if not ended.is_set():
                    raise BackendUnavailable(self.name, "is still stopping")
                continue
            self.backoff.check()
            wait = self.backoff.wait()
            if wait > 0:
                await anyio.sleep(wait)
                continue
            await self._start()

    async def stop(self) -> None:
        """Stop the server if it runs; bounded, and safe to call from any task."""
        if self.state is State.STOPPED:
            return
        if self.state is State.RUNNING:
            # At once, before any wait: a request arriving while the process winds down must start a fresh one,
            # not be sent to this one and lost with its connection.
            self._set_state(State.STOPPING)
        self._stop.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._settings.shutdown_timeout + STOP_GRACE):
            await self._ended.wait()

    def forgive(self) -> None:
        """Forget past failures (a login fixed their cause): the next request starts it at once."""
        self.backoff.forgive()
        self.needs_login = False

    def status(self) -> dict[str, Any]:
        """A summary for health reports."""
        return {
            "state": self.state.value,
            "in_flight": self.in_flight,
            "failures": self.failures,
            "starts": self.starts,
            "last_error": self.last_error,
            "circuit_open": self.backoff.circuit_open(),
            "retry_in_s": round(self.backoff.retry_in(), 1),
            "needs_login": self.needs_login,
        }

    # -- internals ----------------------------------------------------------------------------------------------

    def _start_bound(self) -> float:
        return self._settings.connect_timeout * 2 + STOP_GRACE

    def _set_state(self, state: State) -> None:
        self.state = state
        self._changed.set()
        self._changed = anyio.Event()

    async def _start(self) -> None:
        self._set_state(State.STARTING)
        # This start's events, from its first step: a stop requested during the install or the queue for a slot
        # is seen before any process exists, and the stop's wait ends with this start.
        self._stop = anyio.Event()
        self._ended = anyio.Event()
        attempt = _Attempt()
        try:
            prepare = getattr(self._hooks, "prepare_start", None)  # optional hook: e.g. install a catalog env first
            if prepare is not None:
                async with self._waiting_long():
                    await prepare(self.name)
            await self._take_slot()
        except BaseException:
            self._ended.set()
            raise
        started = self._clock()
        self.starts += 1
        self._stderr.mark()
        self._tg.start_soon(self._run, attempt)
        with anyio.CancelScope(shield=True):
            await attempt.ready.wait()  # _run bounds its own handshake and always sets ready
        if attempt.error is not None:
            raise BackendUnavailable(self.name, f"could not start: {self.last_error}") from None
        if not attempt.connected:
            # The connection task was cancelled (the hub is shutting down); retrying would spin in ensure().
            raise BackendUnavailable(self.name, "was stopped while starting")
        self.start_cost = self._clock() - started

    async def _take_slot(self) -> None:
        """A place under the running cap, queued behind earlier starters; bounded by the call timeout, since the
        callers waiting for this start are calls. A stop requested before the slot is taken ends the start."""
        bound = self.call_timeout
        taken = False
        async with self._waiting_long():
            try:
                with anyio.fail_after(bound):
                    async with anyio.create_task_group() as queue:
                        queue.start_soon(_set_when, self._stop, queue.cancel_scope)
                        await self._slots.acquire(self)
                        taken = True
                        queue.cancel_scope.cancel()
            except TimeoutError:
                limit = self._settings.max_running
                raise BackendUnavailable(
                    self.name, f"could not start: no running slot came free within {bound:g} s (max_running = {limit})"
                ) from None
            if self._stop.is_set():
                if taken:
                    self._slots.release(self)
                raise BackendUnavailable(self.name, "was stopped before it started")

    @asynccontextmanager
    async def _waiting_long(self) -> AsyncIterator[None]:
        """A start step bounded by its own timeouts (an install, a queue for a slot): callers waiting for the start
        wait it out instead of applying the handshake bound; if it fails, the start ends there."""
        self._preparing = True
        try:
            yield
        except BaseException:
            self._set_state(State.STOPPED)
            raise
        finally:
            self._preparing = False
        self._set_state(State.STARTING)  # wake waiters: from here the handshake bound applies again

    async def _run(self, attempt: _Attempt) -> None:
        """The connection task: connect, serve until stopped or lost, clean up. Never raises."""
        lost = anyio.Event()
        self._end_reason = None
        try:
            # The handshake deadline is a watchdog cancelling this whole scope: a deadline scope around entering
            # the client alone would have to exit while the client's own task groups are still open.
            with anyio.CancelScope() as scope:
                self._tg.start_soon(_watchdog, scope, attempt.ready, self._settings.connect_timeout * 2)
                await self._connected(attempt, lost)
            if scope.cancelled_caught and not attempt.ready.is_set():
                self.backoff.record(f"did not complete its handshake in time{self._stderr.hint()}")
                attempt.error = TimeoutError()
            elif lost.is_set() and not self._stop.is_set():
                self.backoff.record(f"exited unexpectedly{self._stderr.hint()}")
        except Exception as exc:  # task boundary: a broken downstream must never take the hub down
            self.needs_login = needs_login(exc)
            reason = describe_failure(exc, started=attempt.ready.is_set())
            self._end_reason = reason if isinstance(innermost(exc), HubError) else None
            self.backoff.record(f"{reason}{self._stderr.hint()}")
            if self.needs_login:
                try:
                    self._hooks.on_needs_login(self.name)
                except Exception:  # a hook's bug must not take the hub down either
                    logger.exception("server %s: offering a login failed", self.name)
            attempt.error = exc
        finally:
            self._client = None
            self._slots.release(self)
            self._set_state(State.STOPPED)
            self._ended.set()
            attempt.ready.set()

    async def _connected(self, attempt: _Attempt, lost: anyio.Event) -> None:
        async with self._make_client(lost) as client:
            if self.spec.protocol in MODERN_PROTOCOL_VERSIONS:
                await discover_pinned(client, self.spec.protocol)
            listing = await fetch_listing(client, self._settings.connect_timeout, self.name)
            self._client = client
            self._set_state(State.STOPPING if self._stop.is_set() else State.RUNNING)
            self.last_used = self._clock()
            # Publish before reporting ready: whoever waited for the start (discovery, a first list) must find
            # the server's tools in the registry once it returns.
            await self._publish(listing)
            await self._connected_hook(client)
            attempt.connected = True
            attempt.ready.set()
            async with anyio.create_task_group() as waiters:
                waiters.start_soon(_set_when, self._stop, waiters.cancel_scope)
                waiters.start_soon(_set_when, lost, waiters.cancel_scope)
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    waiters.start_soon(self._changes.run, client, self._finished)

    def _make_client(self, lost: anyio.Event) -> Client:
        target = build_target(self.spec, self._context)
        self._channel = None
        if not isinstance(target, MCPServer | Server):
            self._channel = RawChannel()
            target = watched(target, on_junk=self._on_junk, on_end=lost.set, channel=self._channel)
        return Client(
            target,
            mode=self.spec.protocol,
            message_handler=self._on_message,
            cache=None,
            **self._hooks.client_options(self.name),
        )

    def _on_junk(self, exc: Exception) -> SessionMessage | None:
        """A message the transport could not parse: an error for the request it plainly answered (so that request
        fails now, not at its timeout), else counted and logged."""
        answer = answer_to_junk(exc, self.name)
        if answer is not None:
            return answer
        self.junk_lines += 1
        if self.junk_lines <= 3 or self.junk_lines % 100 == 0:
            logger.warning("server %s wrote a line that is not JSON-RPC (%d so far)", self.name, self.junk_lines)
        return None

    async def _on_message(self, message: Any) -> None:
        if not isinstance(message, types.ServerNotification):
            return
        if isinstance(
            message,
            types.ToolListChangedNotification
            | types.ResourceListChangedNotification
            | types.PromptListChangedNotification,
        ):
            self._tg.start_soon(self._refresh)
            return
        await self._hooks.on_notification(self.name, message)

    async def _on_event(self, event: object) -> None:
        if isinstance(event, ResourceUpdated):
            params = types.ResourceUpdatedNotificationParams(uri=event.uri)
            await self._hooks.on_notification(self.name, types.ResourceUpdatedNotification(params=params))
        else:
            self._tg.start_soon(self._refresh)

    async def resubscribe(self) -> None:
        """The set of subscribed resources changed: reopen the change stream and wait for its acknowledgement."""
        await self._changes.resubscribe()

    def _refresh_soon(self) -> None:
        self._tg.start_soon(self._refresh)

    async def _refresh(self) -> None:
        """Re-list after the server said a list changed. Failures are logged, not raised (task boundary)."""
        client = self._client
        if client is None:
            return
        try:
            listing = await fetch_listing(client, self._settings.connect_timeout, self.name)
        except Exception:  # task boundary
            logger.warning("server %s announced a list change but re-listing failed", self.name, exc_info=True)
            return
        await self._publish(listing)

    async def _connected_hook(self, client: Client) -> None:
        try:
            with anyio.move_on_after(self._settings.connect_timeout):
                await self._hooks.on_connected(self.name, client)
        except Exception:  # task boundary: re-applying client state is best effort
            logger.exception("connect hook failed for server %s", self.name)

    async def _publish(self, listing: Listing) -> None:
        try:
            await self._hooks.on_listing(self.name, listing)
        except Exception:  # task boundary: a hook failure must not kill the connection
            logger.exception("listing hook failed for server %s", self.name)


async def _watchdog(scope: anyio.CancelScope, ready: anyio.Event, timeout: float) -> None:
    with anyio.move_on_after(timeout):
        await ready.wait()
    if not ready.is_set():
        scope.cancel()


async def _set_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
