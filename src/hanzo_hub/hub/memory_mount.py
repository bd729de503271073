"""The hub's own memory server: the memory surface, served in process and scoped by who is asking.

It runs like any downstream (started on first use, its tool list snapshotted), so the store and the embedding
model load only when memory is first used. While it runs, consolidation runs every ``memory.consolidate_every``
seconds over the scopes open in this hub (a scope opened later gets its retention as it opens). Identity comes
from the hub, never from the client: the hub stamps the authenticated user (the local user over stdio), the
project and the session into each forwarded request's ``_meta`` under ``dev.hanzo-hub/*`` keys, overwriting
anything a client sent there.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from hanzo_hub.config import HubSettings
from hanzo_hub.errors import MemoryStoreError
from hanzo_hub.hub.llm_runtime import LlmRuntime
from hanzo_hub.hub.memory_llm import RoutedGeneralizer, RoutedSummarizer
from hanzo_hub.memory import MemoryScope, MemoryService, build_memory_server
from hanzo_hub.memory.consolidate import Consolidator, run_periodically
from hanzo_hub.memory.summarize import SessionSummarizer
from hanzo_hub.vectors import build_embedder

logger = logging.getLogger(__name__)

MEMORY_SERVER = "memory"
USER_KEY = "dev.hanzo-hub/user"
PROJECT_KEY = "dev.hanzo-hub/project"
SESSION_KEY = "dev.hanzo-hub/session"
NAMED_SESSION = "named:"
"""Prefix of a session a stateless-era client named (it has no connection to end with: idle expiry ends it)."""
DEFAULT_PROJECT = "default"
SHUTDOWN_PROMOTION_TIMEOUT = 10.0
"""Seconds the stopping memory server spends promoting its sessions' often-read memories."""


class _OpenedService:
    """Stands in for the ``MemoryService`` that the server's lifespan opens (on the server's first use)."""

    def __init__(self) -> None:
        self.service: MemoryService | None = None
        self._listeners: list[Any] = []

    def on_change(self, listener: Any) -> None:
        self._listeners.append(listener)
        if self.service is not None:
            self.service.on_change(listener)

    def opened(self, service: MemoryService | None) -> None:
        self.service = service
        if service is not None:
            for listener in self._listeners:
                service.on_change(listener)

    def __getattr__(self, name: str) -> Any:
        if self.service is None:
            raise MemoryStoreError("the memory store is not open")
        return getattr(self.service, name)


class MemoryMount:
    """The hub's memory server and what the hub tells it from outside MCP: that a client session has ended."""

    def __init__(self, server: MCPServer, holder: _OpenedService, consolidator: Consolidator) -> None:
        self.server = server
        self.holder = holder
        self._consolidator = consolidator
        self.tasks: anyio.abc.TaskGroup | None = None
        """The running server's task group (its lifespan's); ``None`` while the store is closed."""

    def holds_sessions(self) -> bool:
        """Whether live sessions keep memories in the running server (a stop would lose them)."""
        service = self.holder.service
        return service is not None and service.store.holds_sessions()

    def session_ended(self, session: str) -> None:
        """A client connection is gone (called on the event loop): promote its session's often-read memories and
        evict the rest of its session tier, in the background. Nothing to do while the store is closed (a closed
        store keeps no session tier)."""
        if self.tasks is not None:
            self.tasks.start_soon(self._end, session)

    async def end_all_sessions(self) -> None:
        """End every session the store still holds (the server is stopping)."""
        service = self.holder.service
        if service is None:
            return
        for session in service.store.session_ids():
            await self._end(session)

    async def _end(self, session: str) -> None:
        try:
            report = await self._consolidator.end_session(session)
        except Exception:  # task boundary: a failed promotion must not take the memory server down
            logger.exception("ending a memory session failed")
            return
        if report.promoted:
            logger.info("session ended: %d session memories promoted to project memory", len(report.promoted))


def build(settings: HubSettings) -> MCPServer:
    """The memory server for ``settings``; its store opens when a client first connects to it."""
    return mount(settings).server


def mount(settings: HubSettings, llm: LlmRuntime | None = None) -> MemoryMount:
    """The memory server for ``settings`` and its session-end hook; summaries and generalization go through
    ``llm``'s router when it has a provider (else the memory layer's deterministic fallbacks)."""
    holder = _OpenedService()

    async def scope_of(ctx: Context[Any, Any]) -> MemoryScope:
        meta: dict[str, Any] = dict(ctx.request_context.meta or {})
        return MemoryScope(
            user=str(meta.get(USER_KEY) or settings.user),
            project=str(meta.get(PROJECT_KEY) or DEFAULT_PROJECT),
            session=str(meta.get(SESSION_KEY) or "default"),
        )

    @asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        embedder = build_embedder(settings.memory.embedder, settings.embedding, home=settings.home)
        async with MemoryService.open(settings.memory, settings.memory_dir, embedder) as service:
            holder.opened(service)
            try:
                every = settings.memory.consolidate_every
                async with run_periodically(consolidator, every), anyio.create_task_group() as tasks:
                    made.tasks = tasks
                    try:
                        yield {}
                    finally:
                        made.tasks = None
                        tasks.cancel_scope.cancel()
                        # Every session ends with the store: promote what they read often before it closes (a
                        # stdio client's session ends as the hub does). Shielded and bounded, like any shutdown step.
                        with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_PROMOTION_TIMEOUT):
                            await made.end_all_sessions()
            finally:
                holder.opened(None)

    service = cast(MemoryService, holder)
    summarizer = SessionSummarizer(service, RoutedSummarizer(llm)) if llm is not None else None
    consolidator = Consolidator(service, RoutedGeneralizer(llm) if llm is not None else None, expiring=NAMED_SESSION)
    server = build_memory_server(service, scope_of, summarizer=summarizer, consolidator=consolidator, lifespan=lifespan)
    made = MemoryMount(server, holder, consolidator)
    return made


def identity_meta(user: str, project: str | None, session: str) -> types.RequestParamsMeta:
    """The ``_meta`` entries that tell the memory server who is asking."""
    return cast(
        types.RequestParamsMeta, {USER_KEY: user, PROJECT_KEY: project or DEFAULT_PROJECT, SESSION_KEY: session}
    )
