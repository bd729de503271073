"""A stateless-era (2026-07-28) server's change stream: ``subscriptions/listen``, kept open while it is connected.

Such servers announce list changes and resource updates only on that stream, never as notifications. The stream
asks for the list changes the server offers and for updates of the resources the hub's clients subscribed to, and
is reopened whenever those subscriptions change (:meth:`ChangeStream.resubscribe`, which waits for the server to
acknowledge the new stream: an update published between a subscribe call's answer and the new stream would be
lost). The first call after a start runs before the stream is open; if any request ran before the stream was
acknowledged, the lists are fetched again, since a call that changed them announced it to nobody.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import anyio
from mcp import Client

__all__ = ["LISTEN_ACK_TIMEOUT", "ChangeStream"]

logger = logging.getLogger(__name__)

LISTEN_ACK_TIMEOUT = 5.0
"""Bound on waiting for a stateless-era server to acknowledge a reopened change stream."""


class ChangeStream:
    """One server's change stream across its connections (see the module)."""

    def __init__(
        self,
        server: str,
        subscriptions: Callable[[], Sequence[str]],
        on_event: Callable[[object], Awaitable[None]],
        requests: Callable[[], tuple[int, int]],
        relist: Callable[[], None],
    ) -> None:
        """``subscriptions``: the resource URIs the hub's clients subscribed to; ``on_event``: each event;
        ``requests``: the server's requests finished so far and those in flight; ``relist``: fetch the lists
        again, in the background."""
        self._server = server
        self._subscriptions = subscriptions
        self._on_event = on_event
        self._requests = requests
        self._relist = relist
        self._relisten = anyio.Event()
        self._acked = anyio.Event()
        self._acks = 0
        self._listening = False

    async def run(self, client: Client, finished_at_listing: int) -> None:
        """Listen on ``client`` until the connection or the stream ends (a task of the connection).
        ``finished_at_listing``: the requests finished when the connection fetched its lists."""
        caps = client.server_capabilities
        lists = {
            "tools_list_changed": bool(caps.tools and caps.tools.list_changed),
            "resources_list_changed": bool(caps.resources and caps.resources.list_changed),
            "prompts_list_changed": bool(caps.prompts and caps.prompts.list_changed),
        }
        self._listening = True
        first = True
        try:
            while True:
                uris = tuple(self._subscriptions())
                relisten = self._relisten
                if not any(lists.values()) and not uris:
                    await relisten.wait()
                    self._relisten = anyio.Event()
                    continue
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_cancel_when, relisten, tg.cancel_scope)
                        async with client.listen(**lists, resource_subscriptions=uris) as subscription:
                            self._acks += 1  # acknowledged: events for these URIs now reach us
                            finished, in_flight = self._requests()
                            if first and (in_flight or finished != finished_at_listing):
                                self._relist()
                            first = False
                            self._acked.set()
                            self._acked = anyio.Event()
                            async for event in subscription:
                                await self._on_event(event)
                        tg.cancel_scope.cancel()
                except Exception:  # task boundary: a server that cannot listen still serves requests
                    logger.warning("server %s does not deliver change events", self._server, exc_info=True)
                    return
                if not relisten.is_set():
                    return  # the server closed the stream gracefully
                self._relisten = anyio.Event()
        finally:
            self._listening = False

    async def resubscribe(self) -> None:
        """The set of subscribed resources changed: reopen the stream and wait (bounded) for its acknowledgement."""
        if not self._listening:
            return
        seen, acked = self._acks, self._acked
        self._relisten.set()
        with anyio.move_on_after(LISTEN_ACK_TIMEOUT):
            while self._acks == seen and self._listening:
                await acked.wait()
                acked = self._acked


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
