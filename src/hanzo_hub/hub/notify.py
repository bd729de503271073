"""List-changed notifications to clients of both protocol eras.

Handshake-era (2025-11-25) clients get session notifications; the hub remembers each such session when it first
makes a request. Stateless-era (2026-07-28) clients get events on ``subscriptions/listen`` through the bus.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import anyio
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ServerEvent, ToolsListChanged
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from hanzo_hub.hub.connections import session_connection

logger = logging.getLogger(__name__)

SEND_TIMEOUT = 2.0
"""A client that does not take a notification within this time misses it; it never stalls the hub."""


class ChangeNotifier:
    """Tells every connected client that a list changed."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.listen_handler = ListenHandler(self.bus)
        # Keyed by connection, latest session last. The SDK builds a ServerSession per request, so a weak set of
        # sessions forgets a client as soon as its request ends; the connection lives as long as the client, and
        # its exit stack tells us when it goes.
        self._sessions: dict[Any, ServerSession] = {}

    def track(self, session: ServerSession, protocol_version: str) -> None:
        """Remember a handshake-era client so it hears of changes until it disconnects."""
        if protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return
        connection = session_connection(session)
        known = self._sessions.pop(connection, None) is not None
        self._sessions[connection] = session
        if not known:
            connection.exit_stack.callback(self._sessions.pop, connection, None)

    def sessions(self) -> list[ServerSession]:
        """Handshake-era sessions still connected (as far as the hub knows)."""
        return list(self._sessions.values())

    def any_session(self, capability: str) -> ServerSession | None:
        """The most recently seen session, for requests no call is in flight for (roots at start-up)."""
        sessions = self.sessions()
        return sessions[-1] if sessions else None

    async def changed(self, kinds: Iterable[str]) -> None:
        """Notify everyone that the given kinds (``tools``, ``resources``, ``prompts``) changed."""
        kinds = set(kinds)
        events: dict[str, ServerEvent] = {
            "tools": ToolsListChanged(),
            "resources": ResourcesListChanged(),
            "prompts": PromptsListChanged(),
        }
        for kind in sorted(kinds):
            await self.bus.publish(events[kind])
        for connection, session in list(self._sessions.items()):
            for kind in sorted(kinds):
                send = {
                    "tools": session.send_tool_list_changed,
                    "resources": session.send_resource_list_changed,
                    "prompts": session.send_prompt_list_changed,
                }[kind]
                try:
                    with anyio.fail_after(SEND_TIMEOUT):
                        await send()
                except Exception:  # a gone or stuck client must not affect the others
                    logger.debug("dropping a closed client session from notifications", exc_info=True)
                    self._sessions.pop(connection, None)
                    break

    def close(self) -> None:
        """End every listen stream."""
        self.listen_handler.close()
