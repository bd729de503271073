"""Remote downstream servers: streamable HTTP and the legacy HTTP+SSE transport, on the SDK's httpx2 stack."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import McpHttpClientFactory
from mcp.shared.message import SessionMessage

from hanzo_hub.backends import sse_posts
from hanzo_hub.backends.base import ConnectContext
from hanzo_hub.backends.http_caps import capped_client
from hanzo_hub.backends.http_errors import ErrorStatusTransport
from hanzo_hub.backends.oauth import authorization, unauthorized_hook
from hanzo_hub.config import HttpServerSpec, SseServerSpec
from hanzo_hub.sandbox.vault import expand_secrets

MAX_MESSAGE_BYTES = 64 * 1024**2
"""The default cap on one answer (``backends.max_message_bytes``)."""
READ_TIMEOUT = 300.0
"""Idle time allowed on a server-sent event stream."""


def remote_headers(spec: HttpServerSpec | SseServerSpec, secrets: Mapping[str, str]) -> dict[str, str]:
    """The spec's headers, ``${vault:NAME}`` references filled from ``secrets`` (raises ``VaultError``)."""
    return {name: expand_secrets(value.get_secret_value(), secrets) for name, value in spec.headers.items()}


def _client_factory(
    server: str,
    oauth: httpx2.Auth | None,
    max_message_bytes: int,
    post_failed: Callable[[Exception], None] | None = None,
    refused: Callable[[dict[str, Any]], None] | None = None,
) -> McpHttpClientFactory:
    """HTTP clients carrying the server's OAuth (a login the hub holds) or, without one, turning a 401 into
    ``AuthorizationRequired`` with the command that logs in; answers capped at ``max_message_bytes`` (0: no cap);
    ``post_failed`` and ``refused`` told of each message a legacy SSE client fails to post (``sse_posts``)."""

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        hooks = {} if oauth is not None else {"response": [unauthorized_hook(server)]}
        transport = ErrorStatusTransport(httpx2.AsyncHTTPTransport(), server)
        client = capped_client(
            server,
            max_message_bytes,
            headers=headers,
            timeout=timeout,
            auth=oauth or auth,
            event_hooks=hooks,
            transport=transport,
        )
        if post_failed is not None:
            sse_posts.watch(client, server, post_failed, refused)
        return client

    return factory


@asynccontextmanager
async def open_remote(
    spec: HttpServerSpec | SseServerSpec,
    server: str,
    headers: dict[str, str],
    connect_timeout: float,
    oauth: httpx2.Auth | None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    post_failed: Callable[[Exception], None] | None = None,
    refused: Callable[[dict[str, Any]], None] | None = None,
) -> AsyncIterator[TransportStreams]:
    """A streamable HTTP or legacy SSE transport to ``spec`` with ``headers`` and ``oauth`` (see ``_client_factory``);
    the HTTP client lives as long as the connection. Serving and ``hanzo-hub auth login`` both connect through it.
    An answer (a JSON body, or one server-sent event) over ``max_message_bytes`` is an error for the request it
    answered (``backends.http_caps``; 0: no cap). ``post_failed``, ``refused``: see ``connect_sse``."""
    factory = _client_factory(server, oauth, max_message_bytes, post_failed, refused)
    if isinstance(spec, HttpServerSpec):
        timeout = httpx2.Timeout(connect_timeout, read=READ_TIMEOUT)
        event_cap = max_message_bytes or None
        async with (
            factory(headers=headers, timeout=timeout) as http,
            streamable_http_client(spec.url, http_client=http, max_sse_event_size=event_cap) as streams,
        ):
            yield streams
        return
    async with sse_client(
        spec.url,
        headers=headers,
        timeout=connect_timeout,
        sse_read_timeout=READ_TIMEOUT,
        httpx_client_factory=factory,
    ) as streams:
        yield streams


@asynccontextmanager
async def connect_streamable(spec: HttpServerSpec, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    """A streamable HTTP transport, with the hub's OAuth login for the server if it holds one."""
    auth = await authorization(
        spec, context.server, context.oauth, context.secrets, context.learn_secret, context.login_needed
    )
    headers = remote_headers(spec, context.secrets)
    async with open_remote(
        spec, context.server, headers, context.connect_timeout, auth, context.max_message_bytes
    ) as streams:
        yield streams


@asynccontextmanager
async def connect_sse(spec: SseServerSpec, context: ConnectContext) -> AsyncIterator[TransportStreams]:
    """A legacy HTTP+SSE transport, with the hub's OAuth login for the server if it holds one.

    The SDK's client swallows an error raised while it posts a message: its writer stops, and the request (and every
    later one) waits out its timeout. Here (``sse_posts``) a request the server refuses with an error status is
    answered at once with its JSON-RPC error, put into the stream the session reads, and the connection goes on; a
    post that failed as a whole (a login the server no longer accepts, a forgotten session, a network failure) ends
    the connection with that error, so the requests fail at once and say why."""
    failures: list[Exception] = []
    failed = anyio.Event()

    def post_failed(exc: Exception) -> None:
        failures.append(exc)
        failed.set()

    auth = await authorization(
        spec, context.server, context.oauth, context.secrets, context.learn_secret, context.login_needed
    )
    headers = remote_headers(spec, context.secrets)
    answers, read = anyio.create_memory_object_stream[SessionMessage | Exception](math.inf)

    def refused(error: dict[str, Any]) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            answers.send_nowait(SessionMessage(types.jsonrpc_message_adapter.validate_python(error)))

    async def end_when_a_post_failed() -> None:
        await failed.wait()
        raise failures[0]

    async def relay(sdk_read: Any) -> None:
        async with answers:
            async for item in sdk_read:
                await answers.send(item)

    timeout, cap = context.connect_timeout, context.max_message_bytes
    async with (
        open_remote(spec, context.server, headers, timeout, auth, cap, post_failed, refused) as (sdk_read, write),
        read,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(end_when_a_post_failed)
        tg.start_soon(relay, sdk_read)
        yield read, write
        tg.cancel_scope.cancel()
