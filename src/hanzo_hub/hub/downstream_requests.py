"""The era-aware requests the hub itself sends to downstream servers (logging level, resource subscriptions)."""

from __future__ import annotations

import mcp_types as types
from mcp import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["is_modern", "legacy_request", "set_level_request", "subscription_request"]


def is_modern(client: Client) -> bool:
    """Whether ``client`` talks to its server in the stateless (2026-07-28) era."""
    return client.protocol_version in MODERN_PROTOCOL_VERSIONS


async def legacy_request(client: Client, request: types.ClientRequest) -> None:
    """Send a 2025-11-25-only request (deprecated in the SDK for 2026-07-28) as a plain request: no warning."""
    await client.session.send_request(request, types.EmptyResult)


def set_level_request(level: types.LoggingLevel) -> types.ClientRequest:
    return types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))


def subscription_request(uri: str, *, subscribe: bool) -> types.ClientRequest:
    if subscribe:
        return types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    return types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
