"""All downstream servers: their supervisors, the cap on running servers (:mod:`.slots`), the idle reaper, and
clean shutdown.

``async with BackendPool(...) as pool`` owns one task group in which every connection task runs. Leaving the
context stops every server concurrently under a shielded, bounded scope, so no child process outlives the pool,
even when the hub is cancelled.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from hanzo_hub.backends.base import ConnectContext
from hanzo_hub.backends.metrics import NO_METRICS, BackendMetrics
from hanzo_hub.backends.slots import RunningSlots
from hanzo_hub.backends.supervisor import STOP_GRACE, State, Supervisor
from hanzo_hub.backends.supervisor_ports import SupervisorHooks
from hanzo_hub.config import BackendSettings, ServerSpec
from hanzo_hub.errors import BackendError, BackendUnavailable, HubError

logger = logging.getLogger(__name__)

REAPER_MAX_INTERVAL = 30.0


class BackendPool:
    """Supervisors for every configured downstream server."""

    def __init__(
        self,
        servers: Mapping[str, ServerSpec],
        settings: BackendSettings,
        log_dir: Path,
        hooks: SupervisorHooks,
        clock: Callable[[], float] = time.monotonic,
        local_servers: Mapping[str, Any] | None = None,
        sandboxes: Mapping[str, Any] | None = None,
        secrets: Mapping[str, str] | None = None,
        redact: Callable[[str], str] | None = None,
        oauth: Any = None,
        metrics: BackendMetrics | None = None,
        learn_secret: Callable[[str, str], None] | None = None,
    ) -> None:
        self._specs = {name: spec for name, spec in servers.items() if spec.enabled}
        self._local = dict(local_servers or {})
        self._sandboxes = dict(sandboxes or {})
        self._secrets = dict(secrets or {})
        self._redact = redact
        self._oauth = oauth
        self._metrics = metrics
        self._learn_secret = learn_secret
        self._settings = settings
        self._log_dir = log_dir
        self._hooks = hooks
        self._clock = clock
        self._slots = RunningSlots(settings.max_running, clock)
        self._tg: anyio.abc.TaskGroup | None = None
        self.supervisors: dict[str, Supervisor] = {}

    async def __aenter__(self) -> BackendPool:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        for name, spec in self._specs.items():
            self._supervise(name, spec)
        if self._settings.idle_timeout > 0:
            tg.start_soon(self._reap_idle)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        # Stop every server before cancelling the task group, shielded so a cancelled hub still reaps its
        # children; each stop is bounded, and they run concurrently so shutdown takes one grace period, not N.
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._settings.shutdown_timeout + STOP_GRACE * 2):
            await self.stop_all()
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    def _supervise(self, name: str, spec: ServerSpec) -> Supervisor:
        assert self._tg is not None
        context = ConnectContext(
            server=name,
            log_dir=self._log_dir,
            connect_timeout=self._settings.connect_timeout,
            local=self._local.get(name),
            sandbox=self._sandboxes.get(name),
            secrets=self._secrets,
            redact=self._redact,
            log_max_bytes=self._settings.log_max_bytes,
            log_backups=self._settings.log_backups,
            max_message_bytes=self._settings.max_message_bytes,
            oauth=self._oauth,
            learn_secret=self._learn_secret,
            login_needed=functools.partial(self._login_needed, name),
        )
        bound = self._metrics.server(name) if self._metrics is not None else NO_METRICS
        supervisor = Supervisor(
            name, spec, self._settings, context, self._hooks, self._slots, self._tg, clock=self._clock, metrics=bound
        )
        self.supervisors[name] = supervisor
        return supervisor

    def _login_needed(self, name: str) -> None:
        """Server ``name`` asked for OAuth scopes its login lacks: calls to it may be mended by a login."""
        supervisor = self.supervisors.get(name)
        if supervisor is not None:
            supervisor.needs_login = True

    def add(self, name: str, spec: ServerSpec, *, sandbox: Any = None) -> None:
        """Supervise a server that was not configured at start (a reloaded config); it starts on first use."""
        self._specs[name] = spec
        if sandbox is not None:
            self._sandboxes[name] = sandbox
        self._supervise(name, spec)

    async def remove(self, name: str) -> None:
        """Stop a server and forget it (a reloaded config dropped or changed it); bounded like every stop."""
        supervisor = self.supervisors.pop(name, None)
        self._specs.pop(name, None)
        self._sandboxes.pop(name, None)
        if supervisor is not None:
            supervisor.retired = True  # a call that fetched it before now must not start it again
            await supervisor.stop()

    def get(self, name: str) -> Supervisor:
        """The supervisor of ``name``.

        Raises:
            BackendUnavailable: no such server (any more: a reloaded config removed it).
        """
        try:
            return self.supervisors[name]
        except KeyError:
            raise BackendUnavailable(name, "is not configured (a config reload removed it)") from None

    @property
    def running(self) -> set[Supervisor]:
        """Servers running now."""
        return set(self._slots.running)

    async def stop_all(self) -> None:
        """Stop every running server, concurrently."""
        async with anyio.create_task_group() as tg:
            for supervisor in self.supervisors.values():
                if supervisor.state is not State.STOPPED:
                    tg.start_soon(supervisor.stop)

    def start_discovery(self, names: Iterable[str], on_done: Callable[[], None]) -> None:
        """Start, in the background, the servers in ``names`` (those without a snapshot), a few at a time."""
        assert self._tg is not None
        self._tg.start_soon(self._discover, list(names), on_done)

    async def _discover(self, names: list[str], on_done: Callable[[], None]) -> None:
        limiter = anyio.CapacityLimiter(self._settings.start_concurrency)

        async def one(name: str) -> None:
            async with limiter:
                try:
                    await self.supervisors[name].ensure()
                except HubError as exc:
                    logger.warning("discovery of server %s failed: %s", name, exc)

        try:
            async with anyio.create_task_group() as tg:
                for name in names:
                    tg.start_soon(one, name)
        finally:
            on_done()

    async def _reap_idle(self) -> None:
        interval = min(max(self._settings.idle_timeout / 4, 0.05), REAPER_MAX_INTERVAL)
        while True:
            await anyio.sleep(interval)
            now = self._clock()
            for supervisor in list(self._slots.running):
                idle_for = now - supervisor.last_used
                if (
                    supervisor.in_flight == 0
                    and supervisor.state is State.RUNNING
                    and idle_for >= self._settings.idle_timeout
                    and not supervisor.holding
                ):
                    logger.info("stopping server %s after %.0f s idle", supervisor.name, idle_for)
                    assert self._tg is not None
                    self._tg.start_soon(supervisor.stop)

    def status(self) -> dict[str, Any]:
        """Per-server state for health reports."""
        return {name: sup.status() for name, sup in self.supervisors.items()}


__all__ = ["BackendError", "BackendPool"]
