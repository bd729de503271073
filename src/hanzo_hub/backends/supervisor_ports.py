"""What a supervisor needs from the layers around it: the hub's hooks above it and the pool's running cap."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types
from mcp import Client

from hanzo_hub.backends.listing import Listing

if TYPE_CHECKING:
    from hanzo_hub.backends.supervisor import Supervisor

__all__ = ["Slots", "SupervisorHooks"]


class SupervisorHooks(Protocol):
    """How a supervisor reports to the hub above it."""

    async def on_listing(self, server: str, listing: Listing) -> None:
        """A fresh live listing arrived."""

    async def on_notification(self, server: str, notification: types.ServerNotification) -> None:
        """The server sent a notification the supervisor does not handle itself."""

    def client_options(self, server: str) -> dict[str, Any]:
        """Extra ``mcp.Client`` keyword arguments (callbacks for server-to-client requests)."""

    async def on_connected(self, server: str, client: Client) -> None:
        """A connection is up: re-apply client state (log level, resource subscriptions)."""

    def resource_subscriptions(self, server: str) -> list[str]:
        """The server's own URIs of the resources clients are subscribed to."""

    def on_needs_login(self, server: str) -> None:
        """A start failed for want of an OAuth login the hub does not hold."""


class Slots(Protocol):
    """The pool's cap on running servers."""

    async def acquire(self, supervisor: Supervisor) -> None:
        """Wait for room to run ``supervisor`` (evicting an idle server if needed)."""

    def release(self, supervisor: Supervisor) -> None:
        """``supervisor`` stopped running."""

    def idle(self, supervisor: Supervisor) -> None:
        """``supervisor`` finished its last request in flight, so it may be evicted now."""
