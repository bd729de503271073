"""Resource subscriptions through the hub, in both protocol eras.

A client subscribes to an exposed URI (``resources/subscribe``, or a ``subscriptions/listen`` stream of the
2026-07-28 era); the :class:`~hanzo_hub.hub.relay.Relay` remembers who listens, and the server that owns the
resource is subscribed once for all of them: a ``resources/subscribe`` request to a handshake-era server, a
reopened change stream for a stateless one. The last listener leaving unsubscribes the server. The hub's own
resources (its server status) need no server: their subscriptions live in the relay only, and whoever publishes
them sends their updates.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress

from mcp import Client, MCPError
from mcp.server.session import ServerSession

from hanzo_hub.backends.pool import BackendPool
from hanzo_hub.errors import HubError
from hanzo_hub.hub.downstream_requests import is_modern, legacy_request, subscription_request
from hanzo_hub.hub.registry import Registry, Target
from hanzo_hub.hub.relay import Relay

__all__ = ["Subscriptions"]

logger = logging.getLogger(__name__)


class Subscriptions:
    """Who listens to which resource, and the downstream subscriptions that follow from it."""

    def __init__(
        self,
        registry: Registry,
        relay: Relay,
        pool: BackendPool,
        resolve: Callable[[str], Awaitable[Target]],
        own: Iterable[str] = (),
    ) -> None:
        """``resolve`` finds the server of an exposed URI (waiting out discovery); ``own`` are the hub's URIs."""
        self._registry = registry
        self._relay = relay
        self._pool = pool
        self._resolve = resolve
        self._own = frozenset(own)

    async def subscribe(self, uri: str, listener: ServerSession) -> None:
        """Subscribe a client session to an exposed resource.

        Raises:
            ResourceNotFound: no server owns the URI.
            BackendError: the owning server failed.
        """
        if uri in self._own:
            self._relay.subscribe(uri, listener)
            return
        target = await self._resolve(uri)
        if self._relay.subscribe(uri, listener):
            await self._update(target, subscribe=True)

    async def listen(self, uris: Iterable[str], key: object) -> list[str]:
        """Subscribe a ``subscriptions/listen`` stream (``key``) to ``uris``; returns those it now watches.

        Unknown URIs and servers that fail are skipped: the stream simply never hears of them.
        """
        done = []
        for uri in uris:
            if uri in self._own:
                self._relay.subscribe_stream(uri, key)
                done.append(uri)
                continue
            try:
                target = await self._resolve(uri)
                if self._relay.subscribe_stream(uri, key):
                    await self._update(target, subscribe=True)
            except (HubError, MCPError):
                logger.info("a listen stream asked for resource %s, which cannot be watched", uri)
                continue
            done.append(uri)
        return done

    async def unsubscribe(self, uri: str, listener: object) -> None:
        """Drop a session's (or a listen stream's) subscription; the server is unsubscribed when nobody listens.

        Raises:
            ResourceNotFound: no server owns the URI (any more).
            BackendError: the owning server failed.
        """
        if uri in self._own:
            self._relay.unsubscribe(uri, listener)
            return
        target = await self._resolve(uri)
        if self._relay.unsubscribe(uri, listener):
            await self._update(target, subscribe=False)

    def of_server(self, server: str) -> list[str]:
        """The server's own URIs of the resources clients subscribed to (for its change stream)."""
        uris = []
        for exposed in self._relay.subscribed():
            if exposed in self._own:
                continue
            with suppress(HubError):  # a server removed by a reload since
                target = self._registry.resolve_uri(exposed)
                if target.server == server:
                    uris.append(target.original)
        return uris

    async def _update(self, target: Target, *, subscribe: bool) -> None:
        supervisor = self._pool.get(target.server)

        async def op(client: Client) -> None:
            if is_modern(client):
                await supervisor.resubscribe()  # its change stream is reopened with the new set of URIs
            else:
                await legacy_request(client, subscription_request(target.original, subscribe=subscribe))

        await supervisor.request(op)
