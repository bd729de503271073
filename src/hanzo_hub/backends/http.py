"""Remote downstream servers: streamable HTTP and the legacy HTTP+SSE transport, on the SDK's httpx2 stack."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
from mcp.client._transport import TransportStreams
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import McpHttpClientFactory

from hanzo_hub.backends.base import ConnectContext
from hanzo_hub.backends.oauth import authorization, unauthorized_hook
from hanzo_hub.config import HttpServerSpec, SseServerSpec
from hanzo_hub.sandbox.vault import expand_secrets

READ_TIMEOUT = 300.0
"""Idle time allowed on a server-sent event stream."""


def _headers(spec: HttpServerSpec | SseServerSpec, context: ConnectContext) -> dict[str, str]:
    """The spec's headers, ``${vault:NAME}`` references filled from the vault (raises ``VaultError``)."""
    return {name: expand_secrets(value.get_secret_value(), context.secrets) for name, value in spec.headers.items()}


def _client_factory(server: str, oauth: httpx2.Auth | None) -> McpHttpClientFactory:
    """HTTP clients carrying the server's OAuth (a login the hub holds) or, without one, turning a 401 into
    ``AuthorizationRequired`` with the command that logs in."""

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        hooks = {} if oauth is not None else {"response": [unauthorized_hook(server)]}
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=oauth or auth, event_hooks=hooks)

    return factory


@asynccontextmanager
async def connect_streamable(spec: HttpServerSpec, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    """A streamable HTTP transport with the spec's headers; the HTTP client lives as long as the connection."""
    timeout = httpx2.Timeout(context.connect_timeout, read=READ_TIMEOUT)
    auth = await authorization(spec, context.server, context.oauth, context.secrets, context.learn_secret)
    factory = _client_factory(context.server, auth)
    async with (
        factory(headers=_headers(spec, context), timeout=timeout) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


@asynccontextmanager
async def connect_sse(spec: SseServerSpec, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    """A legacy HTTP+SSE transport."""
    auth = await authorization(spec, context.server, context.oauth, context.secrets, context.learn_secret)
    async with sse_client(
        spec.url,
        headers=_headers(spec, context),
        timeout=context.connect_timeout,
        sse_read_timeout=READ_TIMEOUT,
        httpx_client_factory=_client_factory(context.server, auth),
    ) as streams:
        yield streams
