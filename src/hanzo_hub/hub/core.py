"""The hub's root object: snapshots, registry, pool and notifier under one lifecycle.

``async with Hub.open(settings) as hub`` loads every snapshot (no server starts), enters the backend pool, starts
background discovery of the servers that have no snapshot yet, and yields. Operations resolve exposed names,
forward to the right supervisor and turn downstream failures into error results that name the failing server:
one broken server never hides the others.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hanzo_hub.backends.base import client_capabilities
from hanzo_hub.backends.inproc import refreshed
from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.metrics import BackendMetrics, PoolCollector
from hanzo_hub.backends.oauth import OAuthStore
from hanzo_hub.backends.pool import BackendPool
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.catalog.envs import is_installed
from hanzo_hub.catalog.loader import Catalog, CatalogEntry, catalog_snapshots, load_catalog
from hanzo_hub.config import HubSettings, InprocServerSpec, ServerSpec
from hanzo_hub.errors import (
    BackendError,
    PromptNotFound,
    ResourceNotFound,
    ToolNotFound,
)
from hanzo_hub.hub.bridge import EraBridge
from hanzo_hub.hub.downstream_requests import is_modern, legacy_request, set_level_request, subscription_request
from hanzo_hub.hub.guard import Guard
from hanzo_hub.hub.identity import acting
from hanzo_hub.hub.install import install_before_start
from hanzo_hub.hub.launch import load_secrets, server_sandboxes
from hanzo_hub.hub.llm_mount import LLM_SERVER, build_llm_server
from hanzo_hub.hub.llm_runtime import LlmRuntime, wants_llm
from hanzo_hub.hub.login_prompt import LOGIN_TOOL, LoginPrompt, mend_key
from hanzo_hub.hub.memory_mount import MEMORY_SERVER, MemoryMount, identity_meta
from hanzo_hub.hub.memory_mount import mount as mount_memory
from hanzo_hub.hub.naming import expose_uri
from hanzo_hub.hub.notify import ChangeNotifier
from hanzo_hub.hub.project import Projects, identity_for
from hanzo_hub.hub.registry import Registry, Target
from hanzo_hub.hub.relay import Relay
from hanzo_hub.hub.reload import watch as watch_config
from hanzo_hub.hub.results import flag_text_errors
from hanzo_hub.hub.served import configured_servers, exposure
from hanzo_hub.hub.status import STATUS_URI
from hanzo_hub.hub.subscriptions import Subscriptions
from hanzo_hub.sandbox.launch import Backends
from hanzo_hub.sandbox.vault import redacted_logs, redacted_model, redacted_progress

logger = logging.getLogger(__name__)

_install_progress: ContextVar[ProgressFnT | None] = ContextVar("hanzo_hub_install_progress", default=None)

T = TypeVar("T")


class Hub:
    """Aggregates downstream servers; the front MCP server calls into it."""

    def __init__(self, settings: HubSettings) -> None:
        self.settings = settings
        self.catalog = catalog = load_catalog(settings)  # every manifest that loaded, and the broken ones
        self._seeds = catalog_snapshots(settings, catalog)
        # Hand-configured servers win a name clash with catalog entries.
        self.secrets = secrets = load_secrets(settings)  # injected into servers and redacted from what they send
        configured, entries = configured_servers(settings, catalog, secrets)
        self.catalog_entries: Mapping[str, CatalogEntry] = entries  # those of the served catalog servers
        local: dict[str, Any] = {}
        self.llm = LlmRuntime(settings)
        self.memory: MemoryMount | None = None
        if settings.memory.enabled and MEMORY_SERVER not in configured:
            configured[MEMORY_SERVER] = InprocServerSpec(target="hanzo_hub.hub.memory_mount:build")
            self.memory = mount_memory(settings, self.llm)
            local[MEMORY_SERVER] = self.memory.server
        if wants_llm(settings) and LLM_SERVER not in configured:
            # Handshake era: complete's fallback to the client's model sends a sampling request during the call.
            configured[LLM_SERVER] = InprocServerSpec(
                target="hanzo_hub.hub.llm_mount:build_llm_server", protocol="legacy"
            )
            local[LLM_SERVER] = build_llm_server(self, self.llm)
        servers = {name: spec for name, spec in configured.items() if spec.enabled}
        self.servers: Mapping[str, ServerSpec] = servers  # every enabled one: configured, cataloged, the hub's own
        self._local = local
        self.own = frozenset(local)
        """The hub's own servers (memory, llm): a reloaded config never touches them."""
        self.registry = Registry(servers, **exposure(settings, servers, own=self.own))
        self.snapshots = SnapshotStore(settings.snapshot_dir)
        self.notifier = ChangeNotifier()
        self._background: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._tasks: anyio.abc.TaskGroup | None = None
        remote = any(spec.kind in ("http", "sse") for spec in servers.values())
        self.guard = Guard(settings, entries, self.registry, secrets, remote=remote)
        self.relay = Relay(
            self.notifier,
            user=settings.user,
            sampling=settings.llm.sampling,
            sampler=self.llm.sample,
            redact=self.guard.redact,
        )
        self.projects = Projects(on_session_end=self.memory.session_ended if self.memory is not None else None)
        self.login_prompt = LoginPrompt(self)
        self.bridge = EraBridge()
        self._hashes: dict[str, str] = {}
        self._stored: dict[str, Listing] = {}  # snapshots whose hash is computed only when a live list arrives
        self._discovered = anyio.Event()
        self.sandboxes = Backends(settings.sandbox)
        self.launches = server_sandboxes(settings, servers, entries, self.sandboxes)
        self.metrics = BackendMetrics()
        self.pool = BackendPool(
            servers,
            settings.backends,
            settings.log_dir,
            hooks=self,
            local_servers=local,
            sandboxes=self.launches,
            secrets=secrets,
            redact=self.guard.redact,
            oauth=OAuthStore(settings.vault_dir, settings.sandbox.keyring_service),
            metrics=self.metrics,
            learn_secret=self.guard.learn_secret,
        )
        self.metrics.registry.register(PoolCollector(self.pool.status, lambda: len(self.registry.tools())))
        resolve_uri = functools.partial(self._resolve, self.registry.resolve_uri)
        self.subscriptions = Subscriptions(self.registry, self.relay, self.pool, resolve_uri, own=(STATUS_URI,))

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: HubSettings) -> AsyncIterator[Hub]:
        """Build and run a hub for the duration of the context."""
        hub = cls(settings)
        async with hub.run():
            yield hub

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Load snapshots, run the pool and discovery; on exit every downstream server is stopped.

        Meanwhile every log handler redacts the vault's secrets (a downstream's error can quote its credentials).
        """
        with redacted_logs(self.guard.redactor):
            await self._refresh_own_snapshots()
            missing = self._load_snapshots()
            try:
                async with self.llm.running(), self.pool, self._task_group(missing):
                    yield
            finally:
                self.notifier.close()
                self.guard.close()
                with anyio.CancelScope(shield=True):
                    await self.sandboxes.aclose()

    @asynccontextmanager
    async def _task_group(self, missing: list[str]) -> AsyncIterator[None]:
        """The hub's task group (background tasks, the config watcher, discovery of ``missing``), forgotten as soon as
        it closes: the pool stops its servers after it, and a connection ending then (a 401 asking for a login) must
        find no task group to start work in."""
        try:
            async with anyio.create_task_group() as tg:
                self.bridge.bind(tg)
                self._tasks = tg
                for task in self._background:
                    tg.start_soon(task)
                if self.settings.backends.watch_config > 0:
                    tg.start_soon(watch_config, self)
                if missing:
                    self.pool.start_discovery(missing, self._discovered.set)
                else:
                    self._discovered.set()
                yield
                tg.cancel_scope.cancel()
        finally:
            self._tasks = None
            self.bridge.bind(None)

    def background_once(self, task: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """Run ``task(*args)`` once in the hub's task group, if the hub runs (else nothing)."""
        if self._tasks is not None:
            self._tasks.start_soon(task, *args)

    def on_needs_login(self, server: str) -> None:
        """A remote server wants an OAuth login: offer one through the clients (``hub/login_prompt.py``)."""
        self.login_prompt.offer(server)

    def background(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``task`` in the hub's task group (now, or when ``run`` starts); it is cancelled at shutdown."""
        self._background.append(task)
        if self._tasks is not None:
            self._tasks.start_soon(task)

    def snapshot_tools(self) -> list[types.Tool]:
        """Every exposed tool known from snapshots (and catalog seeds), without running anything."""
        self._load_snapshots()
        return list(self.registry.tools())

    async def _refresh_own_snapshots(self) -> None:
        """The hub's own servers' snapshots list what this hub's code registers (``backends.inproc.refreshed``)."""
        for name, server in self._local.items():
            stored = self.snapshots.load(name)
            if stored is not None and isinstance(server, MCPServer):
                fresh = await refreshed(server, stored)
                if fresh is not None:
                    self.snapshots.save(name, fresh)

    def _load_snapshots(self, names: Iterable[str] | None = None) -> list[str]:
        """Serve every server's stored lists; catalog entries never started yet get their packaged tools."""
        missing = []
        for name in self.servers if names is None else names:
            listing = self.snapshots.load(name)
            if listing is None and name in self._seeds:
                listing = Listing.from_json(self._seeds[name], source="snapshot")
                self.snapshots.save(name, listing)
            if listing is None:
                missing.append(name)
                continue
            self._stored[name] = listing
            self.registry.set(name, listing)
        return missing

    def adopt(
        self, servers: Mapping[str, ServerSpec], entries: Mapping[str, CatalogEntry], catalog: Catalog, launches: Any
    ) -> list[str]:
        """Serve ``servers`` from now on (``hub/reload.py`` has stopped and started the supervisors); returns those
        of the new ones that have no snapshot, for discovery."""
        new = [name for name in servers if name not in self.servers]
        self.servers, self.catalog_entries, self.catalog, self.launches = servers, entries, catalog, launches
        self._seeds = catalog_snapshots(self.settings, catalog)
        for gone in (set(self._hashes) | set(self._stored)) - servers.keys():
            self._hashes.pop(gone, None)
            self._stored.pop(gone, None)
        self.registry.reconfigure(servers, **exposure(self.settings, servers, own=self.own))
        self.guard.reconfigure(self.settings, entries)
        return self._load_snapshots(new)

    # -- hooks for supervisors ----------------------------------------------------------------------------------

    def holds_state(self, server: str) -> bool:
        """Whether ``server`` holds what a stop would lose: the memory server while sessions keep memories in it
        (the session tier lives in process); the idle reaper and the running cap leave such a server running."""
        return server == MEMORY_SERVER and self.memory is not None and self.memory.holds_sessions()

    async def prepare_start(self, server: str) -> None:
        """Before a catalog server starts: build its environment if it is missing (``catalog.install_on_start``).

        Raises:
            BackendUnavailable: the install failed (its reason names the failing step); the next start retries it.
        """
        entry = self.catalog_entries.get(server)
        if entry is None or not self.settings.catalog.install_on_start:
            return
        if await anyio.to_thread.run_sync(is_installed, self.settings, entry):
            return
        await install_before_start(self.settings, entry, _install_progress.get())

    async def on_listing(self, server: str, listing: Listing) -> None:
        """A server's live listing replaces its snapshot; clients hear of it when their view changes."""
        if self.guard.redact is not None:
            listing = await anyio.to_thread.run_sync(listing.redacted, self.guard.redact)
        digest = listing.content_hash()
        if server not in self._hashes and server in self._stored:
            self._hashes[server] = self._stored.pop(server).content_hash()
        if self._hashes.get(server) != digest:
            self._hashes[server] = digest
            await anyio.to_thread.run_sync(self.snapshots.save, server, listing)
        changed = self.registry.set(server, listing)
        if changed:
            logger.info("server %s changed its %s", server, ", ".join(sorted(changed)))
            await self.notifier.changed(changed)

    async def on_notification(self, server: str, notification: types.ServerNotification) -> None:
        """Resource updates go to the clients subscribed to them; other notifications are dropped."""
        if isinstance(notification, types.ResourceUpdatedNotification):
            await self.relay.resource_updated(self._exposed_uri(server, str(notification.params.uri)))
            return
        logger.debug("dropping notification %s from server %s", type(notification).__name__, server)

    def client_options(self, server: str) -> dict[str, Any]:
        """Callbacks relaying the server's sampling, elicitation, roots and log messages to clients."""
        return self.relay.client_options(server)

    async def on_connected(self, server: str, client: Client) -> None:
        """Re-apply the clients' log level and resource subscriptions to a (re)started server."""
        caps = client.server_capabilities
        if self.relay.log_level is not None and caps.logging is not None and not is_modern(client):
            await legacy_request(client, set_level_request(self.relay.log_level))
        if caps.resources is not None and caps.resources.subscribe and not is_modern(client):
            for uri in self.subscriptions.of_server(server):
                await legacy_request(client, subscription_request(uri, subscribe=True))

    def _exposed_uri(self, server: str, uri: str) -> str:
        return expose_uri(uri, self.registry.alias(server)) if self.registry.prefixed(server) else uri

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
        self,
        name: str,
        arguments: dict[str, Any] | None,
        progress: ProgressFnT | None = None,
        ctx: ServerRequestContext[Any, Any] | None = None,
        params: types.CallToolRequestParams | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Call an exposed tool; a failing server yields an error result naming it and why.

        ``progress`` receives the downstream's progress notifications for this call (the caller maps them to its
        own client's progress token). ``ctx`` is the client request being served (see ``_forward``).

        Raises:
            ToolNotFound: no tool of that name.
            MCPError: the downstream server answered with a protocol error.
        """
        target = await self._resolve(self.registry.resolve_tool, name)
        admission = await self.guard.admit(target, arguments, ctx)  # per-call policy, before forwarding
        if admission.refusal is not None:
            return admission.refusal
        result = None
        token = _install_progress.set(progress)  # an install on first use reports to this call (prepare_start)
        try:
            with admission.deadline():
                result = await self._call_target(target, admission.arguments, progress, ctx, params)
        finally:
            _install_progress.reset(token)
        return self.guard.release(admission, result)  # per-call policy, on the result

    async def _call_target(
        self,
        target: Target,
        arguments: dict[str, Any] | None,
        progress: ProgressFnT | None,
        ctx: ServerRequestContext[Any, Any] | None,
        params: types.CallToolRequestParams | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Forward an admitted call to its server (through the era bridge where the eras differ)."""
        if target.original == LOGIN_TOOL and self.login_prompt.is_placeholder(target.server):
            return await self.login_prompt.login_tool(target.server, ctx, params)
        if progress is not None and self.guard.redact is not None:
            progress = redacted_progress(progress, self.guard.redact)
        meta = await self._call_meta(target.server, ctx)
        modern = ctx is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if (
            modern
            and params is not None
            and self.bridge.holds(params.request_state, mend_key(target.server, target.original))
        ):
            waited = await self.login_prompt.resume_mend(target.server, target.original, params)
            if waited is not None:
                return waited
            params = params.model_copy(update={"request_state": None, "input_responses": None})  # the call afresh

        async def run(client: Client, raw: bool) -> types.CallToolResult | types.InputRequiredResult:
            if raw:
                return await client.session.call_tool(
                    target.original,
                    arguments,
                    progress_callback=progress,
                    input_responses=params.input_responses if params else None,
                    request_state=params.request_state if params else None,
                    meta=meta,
                    allow_input_required=True,
                )
            return await client.call_tool(target.original, arguments, progress_callback=progress, meta=meta)

        def forward() -> Awaitable[types.CallToolResult | types.InputRequiredResult]:
            return self._forward(target.server, ctx, run)

        try:
            try:
                if modern:
                    assert ctx is not None
                    calling = functools.partial(self.relay.calling, target.server, ctx)
                    bridged = await self.bridge.call_tool(
                        self.pool, target.server, calling, target.original, arguments, params, meta, progress
                    )
                    if bridged is not None:
                        return flag_text_errors(bridged, self.error_patterns(target.server))
                result = await forward()
            except BackendError as exc:  # a remote server wanting a login: the client's user may give it now
                result = await self.login_prompt.mend(target.server, target.original, ctx, exc, forward)
        except BackendError as exc:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)
        return flag_text_errors(result, self.error_patterns(target.server))

    async def _call_meta(
        self, server: str, ctx: ServerRequestContext[Any, Any] | None
    ) -> types.RequestParamsMeta | None:
        """The ``_meta`` a call to ``server`` carries: the client's, plus who calls for the hub's own servers."""
        meta = self.relay.downstream_meta(ctx)
        if server in (MEMORY_SERVER, LLM_SERVER):
            meta = await identity_for(
                self.projects, self.settings.user, meta, ctx, named_sessions=server == MEMORY_SERVER
            )
            on_behalf = acting()  # the hub's own pipeline (llm chat) calling for a user
            if on_behalf is not None and ctx is None:
                meta = {**meta, **identity_meta(on_behalf.user, on_behalf.project, on_behalf.session)}
        return meta

    def error_patterns(self, server: str) -> tuple[str, ...]:
        """The patterns whose text marks a result of ``server`` as a failure (``hub.results``)."""
        return self.servers[server].error_patterns

    async def _forward(
        self,
        server: str,
        ctx: ServerRequestContext[Any, Any] | None,
        run: Callable[[Client, bool], Awaitable[T]],
    ) -> T:
        """Send one client request to ``server``.

        While it runs, the server's sampling, elicitation and roots requests go back to this client (``relay``),
        and the server sees this client's capabilities instead of the hub's. ``run`` gets ``raw=True`` when both
        ends speak the stateless era: then a downstream ``InputRequiredResult`` is passed back unchanged and the
        client's retry (input responses, request state) forwarded, so multi-round-trip requests need no hub state.
        """
        supervisor = self.pool.get(server)
        modern_client = ctx is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        capabilities = self.relayed_capabilities(ctx)

        async def op(client: Client) -> T:
            with client_capabilities(capabilities):
                return await run(client, modern_client and is_modern(client))

        if ctx is None:
            return await supervisor.request(op)
        with self.relay.calling(server, ctx):
            return await supervisor.request(op)

    def relayed_capabilities(self, ctx: ServerRequestContext[Any, Any] | None) -> dict[str, Any] | None:
        """What a downstream serving ``ctx``'s request is told the client can do: the client's own capabilities,
        plus sampling where the hub's router answers what the client cannot (``None``: the hub's)."""
        capabilities = self.relay.upstream_capabilities(ctx)
        if capabilities is not None and self.llm.available and self.settings.llm.sampling != "client":
            capabilities = {"sampling": {}, **capabilities}
        return capabilities

    async def set_logging_level(self, level: types.LoggingLevel, session: ServerSession | None = None) -> None:
        """Remember a client's log level and pass it to every running server that logs (2025-11-25 ones)."""
        self.relay.set_level(session, level)

        async def one(name: str) -> None:
            supervisor = self.pool.get(name)
            client = supervisor.client
            if client is None or client.server_capabilities.logging is None or is_modern(client):
                return
            try:
                await supervisor.request(lambda c: legacy_request(c, set_level_request(level)))
            except Exception:  # one server refusing must not fail the client's request
                logger.warning("server %s did not take log level %s", name, level)

        async with anyio.create_task_group() as tg:
            for supervisor in self.pool.running:
                tg.start_soon(one, supervisor.name)

    def resource_subscriptions(self, server: str) -> list[str]:
        """The server's own URIs of resources clients subscribed to (for its change stream)."""
        return self.subscriptions.of_server(server)

    async def read_resource(
        self,
        uri: str,
        ctx: ServerRequestContext[Any, Any] | None = None,
        params: types.ReadResourceRequestParams | None = None,
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read an exposed resource.

        Raises:
            ResourceNotFound: no server owns the URI.
            BackendError: the owning server failed.
            MCPError: the downstream server answered with a protocol error.
        """
        target = await self._resolve(self.registry.resolve_uri, uri)
        meta = None
        if target.server in (MEMORY_SERVER, LLM_SERVER):  # these scope reads by who is asking, like their calls
            meta = await identity_for(
                self.projects, self.settings.user, None, ctx, named_sessions=target.server == MEMORY_SERVER
            )

        async def run(client: Client, raw: bool) -> types.ReadResourceResult | types.InputRequiredResult:
            if raw:
                return await client.session.read_resource(
                    target.original,
                    input_responses=params.input_responses if params else None,
                    request_state=params.request_state if params else None,
                    meta=meta,
                    allow_input_required=True,
                )
            return await client.read_resource(target.original, meta=meta)

        result = redacted_model(await self._forward(target.server, ctx, run), self.guard.redact)
        if not self.registry.prefixed(target.server) or not isinstance(result, types.ReadResourceResult):
            return result
        alias = self.registry.alias(target.server)
        contents = [c.model_copy(update={"uri": expose_uri(str(c.uri), alias)}) for c in result.contents]
        return result.model_copy(update={"contents": contents})

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None,
        ctx: ServerRequestContext[Any, Any] | None = None,
        params: types.GetPromptRequestParams | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Render an exposed prompt.

        Raises:
            PromptNotFound: no prompt of that name.
            BackendError: the owning server failed.
            MCPError: the downstream server answered with a protocol error.
        """
        target = await self._resolve(self.registry.resolve_prompt, name)

        async def run(client: Client, raw: bool) -> types.GetPromptResult | types.InputRequiredResult:
            if raw:
                return await client.session.get_prompt(
                    target.original,
                    arguments,
                    input_responses=params.input_responses if params else None,
                    request_state=params.request_state if params else None,
                    allow_input_required=True,
                )
            return await client.get_prompt(target.original, arguments)

        return redacted_model(await self._forward(target.server, ctx, run), self.guard.redact)

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

        return redacted_model(await self.pool.get(target.server).request(op), self.guard.redact)
