"""The hub's root object: snapshots, registry, pool and notifier under one lifecycle.

``async with Hub.open(settings) as hub`` loads every snapshot (no server starts), enters the backend pool, starts
background discovery of the servers that have no snapshot yet, and yields. Operations resolve exposed names,
forward to the right supervisor and turn downstream failures into error results that name the failing server:
one broken server never hides the others.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT

from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.pool import BackendPool
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.config import HubSettings
from hanzo_hub.errors import BackendError, PromptNotFound, ResourceNotFound, ToolNotFound
from hanzo_hub.hub.naming import assign_aliases, expose_uri
from hanzo_hub.hub.notify import ChangeNotifier
from hanzo_hub.hub.registry import Registry, Target

logger = logging.getLogger(__name__)


class Hub:
    """Aggregates downstream servers; the front MCP server calls into it."""

    def __init__(self, settings: HubSettings) -> None:
        self.settings = settings
        servers = {name: spec for name, spec in settings.servers.items() if spec.enabled}
        self._servers = servers
        aliases = assign_aliases(servers, {name: spec.alias for name, spec in servers.items()})
        prefix = settings.exposure.prefix
        use_prefix = len(servers) != 1 if prefix == "auto" else bool(prefix)
        self.registry = Registry(servers, aliases, prefix=use_prefix)
        self.snapshots = SnapshotStore(settings.snapshot_dir)
        self.notifier = ChangeNotifier()
        self._hashes: dict[str, str] = {}
        self._discovered = anyio.Event()
        self.pool = BackendPool(servers, settings.backends, settings.log_dir, hooks=self)

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: HubSettings) -> AsyncIterator[Hub]:
        """Build and run a hub for the duration of the context."""
        hub = cls(settings)
        async with hub.run():
            yield hub

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Load snapshots, run the pool and discovery; on exit every downstream server is stopped."""
        missing = self._load_snapshots()
        try:
            async with self.pool:
                if missing:
                    self.pool.start_discovery(missing, self._discovered.set)
                else:
                    self._discovered.set()
                yield
        finally:
            self.notifier.close()

    def _load_snapshots(self) -> list[str]:
        missing = []
        for name in self._servers:
            listing = self.snapshots.load(name)
            if listing is None:
                missing.append(name)
                continue
            self._hashes[name] = listing.content_hash()
            self.registry.set(name, listing)
        return missing

    # -- hooks for supervisors ----------------------------------------------------------------------------------

    async def on_listing(self, server: str, listing: Listing) -> None:
        """A server's live listing replaces its snapshot; clients hear of it when their view changes."""
        digest = listing.content_hash()
        if self._hashes.get(server) != digest:
            self._hashes[server] = digest
            await anyio.to_thread.run_sync(self.snapshots.save, server, listing)
        changed = self.registry.set(server, listing)
        if changed:
            logger.info("server %s changed its %s", server, ", ".join(sorted(changed)))
            await self.notifier.changed(changed)

    async def on_notification(self, server: str, notification: types.ServerNotification) -> None:
        """Notifications other than list changes (logging, progress, resource updates) are relayed later."""
        logger.debug("notification %s from server %s", type(notification).__name__, server)

    def client_options(self, server: str) -> dict[str, Any]:
        """Callbacks for server-to-client requests; none yet, so downstream requests are refused."""
        return {}

    # -- operations ---------------------------------------------------------------------------------------------

    async def wait_discovered(self) -> None:
        """Wait, up to ``backends.list_wait``, for servers that have no snapshot to list themselves."""
        with anyio.move_on_after(self.settings.backends.list_wait):
            await self._discovered.wait()

    async def _resolve(self, resolve: Callable[[str], Target], name: str) -> Target:
        """Resolve an exposed name; while discovery runs, an unknown name waits (bounded) for it first."""
        try:
            return resolve(name)
        except (ToolNotFound, PromptNotFound, ResourceNotFound):
            if self._discovered.is_set():
                raise
        await self.wait_discovered()
        return resolve(name)

    async def list_tools(self) -> list[types.Tool]:
        """Every exposed tool (snapshot or live)."""
        await self.wait_discovered()
        return list(self.registry.tools())

    async def list_resources(self) -> list[types.Resource]:
        """Every exposed resource."""
        await self.wait_discovered()
        return list(self.registry.resources())

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        """Every exposed resource template."""
        await self.wait_discovered()
        return list(self.registry.templates())

    async def list_prompts(self) -> list[types.Prompt]:
        """Every exposed prompt."""
        await self.wait_discovered()
        return list(self.registry.prompts())

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, progress: ProgressFnT | None = None
    ) -> types.CallToolResult:
        """Call an exposed tool; a failing server yields an error result naming it and why.

        ``progress`` receives the downstream's progress notifications for this call (the caller maps them to its
        own client's progress token).

        Raises:
            ToolNotFound: no tool of that name.
            MCPError: the downstream server answered with a protocol error.
        """
        target = await self._resolve(self.registry.resolve_tool, name)
        supervisor = self.pool.get(target.server)

        async def op(client: Client) -> types.CallToolResult:
            return await client.call_tool(target.original, arguments, progress_callback=progress)

        try:
            return await supervisor.request(op)
        except BackendError as exc:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read an exposed resource.

        Raises:
            ResourceNotFound: no server owns the URI.
            BackendError: the owning server failed.
            MCPError: the downstream server answered with a protocol error.
        """
        target = await self._resolve(self.registry.resolve_uri, uri)

        async def op(client: Client) -> types.ReadResourceResult:
            return await client.read_resource(target.original)

        result = await self.pool.get(target.server).request(op)
        if not self.registry.prefixed:
            return result
        alias = self.registry.alias(target.server)
        contents = [c.model_copy(update={"uri": expose_uri(str(c.uri), alias)}) for c in result.contents]
        return result.model_copy(update={"contents": contents})

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        """Render an exposed prompt.

        Raises:
            PromptNotFound: no prompt of that name.
            BackendError: the owning server failed.
            MCPError: the downstream server answered with a protocol error.
        """
        target = await self._resolve(self.registry.resolve_prompt, name)

        async def op(client: Client) -> types.GetPromptResult:
            return await client.get_prompt(target.original, arguments)

        return await self.pool.get(target.server).request(op)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context: dict[str, str] | None,
    ) -> types.CompleteResult:
        """Completions for an exposed prompt's or resource template's argument, from the owning server.

        Raises:
            PromptNotFound: no prompt of that name.
            ResourceNotFound: no server owns the template.
            BackendError: the owning server failed.
        """
        original: types.PromptReference | types.ResourceTemplateReference
        if isinstance(ref, types.PromptReference):
            target = await self._resolve(self.registry.resolve_prompt, ref.name)
            original = ref.model_copy(update={"name": target.original})
        else:
            target = await self._resolve(self.registry.resolve_uri, ref.uri)
            original = ref.model_copy(update={"uri": target.original})

        async def op(client: Client) -> types.CompleteResult:
            return await client.complete(original, argument, context)

        return await self.pool.get(target.server).request(op)

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` reports."""
        servers = self.pool.status()
        return {
            "status": "ok",
            "servers": len(servers),
            "running": sum(1 for s in servers.values() if s["state"] == "running"),
            "tools": len(self.registry.tools()),
            "detail": servers,
        }
