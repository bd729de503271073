"""How a downstream spec becomes something ``mcp.Client`` connects to, chosen through a dispatch table.

Each transport module exposes ``connect(spec, context) -> target``; the target is an ``mcp.Client`` target (a
``Transport`` context manager or an in-process server). Adding a transport means one module and one table entry.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from hanzo_hub.backends.rawchannel import RawChannel
from hanzo_hub.config import ServerSpec

CONNECTORS: dict[str, str] = {
    "stdio": "hanzo_hub.backends.stdio:connect",
    "http": "hanzo_hub.backends.http:connect_streamable",
    "sse": "hanzo_hub.backends.http:connect_sse",
    "inproc": "hanzo_hub.backends.inproc:connect",
}


@dataclass(frozen=True)
class ConnectContext:
    """What a connector may use besides the spec."""

    server: str
    log_dir: Path
    connect_timeout: float
    local: Any = None
    """An in-process server object the hub built itself (its memory server), served instead of importing one."""
    sandbox: Any = None
    """A ``sandbox.launch.ServerSandbox``: a stdio server is launched through its plan (``None``: unconfined)."""
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Vault values for the ``${vault:NAME}`` references in the spec's env or headers."""
    redact: Callable[[str], str] | None = None
    """The vault's redaction of a text, for what a server writes to its stderr log (``None``: the vault is empty)."""
    log_max_bytes: int = 0
    """A stdio server's stderr log is rotated at this size (0: never)."""
    log_backups: int = 2
    """Rotated stderr logs kept."""
    max_message_bytes: int = 64 * 1024**2
    """A stdio server's message longer than this is dropped, a request it answered gets an error (0: no cap)."""
    oauth: Any = None
    """A ``backends.oauth.OAuthStore``: the OAuth logins of remote servers (``None``: remote servers get no OAuth)."""
    learn_secret: Callable[[str, str], None] | None = None
    """Takes a credential obtained while serving (an OAuth token), to redact it like the vault's secrets."""
    login_needed: Callable[[], None] | None = None
    """Told when a remote server asks for OAuth scopes its login lacks (a step-up): the server needs a new login."""


class Connector(Protocol):
    """Builds a fresh ``mcp.Client`` target for one connection attempt."""

    def __call__(self, spec: Any, context: ConnectContext) -> Any: ...


@cache
def _load(kind: str) -> Connector:
    module, _, attr = CONNECTORS[kind].partition(":")
    connector: Connector = getattr(importlib.import_module(module), attr)
    return connector


def build_target(spec: ServerSpec, context: ConnectContext) -> Any:
    """A new ``mcp.Client`` target for ``spec``."""
    return _load(spec.kind)(spec, context)


@dataclass
class _Era:
    """Which era the connection's requests are sent in, as last seen on the write side."""

    modern: bool = False


def _complete_by_default(item: SessionMessage) -> SessionMessage:
    """A stateless-era result without ``resultType`` is complete (the spec's rule for clients); the SDK rejects it."""
    message = item.message
    assert isinstance(message, types.JSONRPCResponse)
    if "resultType" in message.result:
        return item
    result = {**message.result, "resultType": "complete"}
    return SessionMessage(message.model_copy(update={"result": result}), metadata=item.metadata)


class _WatchedReadStream:
    """Delegates to a transport's read stream and reports each non-message item and the end of the stream.

    On a stateless-era connection it also fills in a missing ``resultType``: "when a client receives a result from a
    server implementing an earlier protocol version (which does not include ``resultType``), the client MUST treat
    the absent field as ``complete``", but ``mcp`` 2.3 fails such a result validation instead.
    """

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        on_junk: Callable[[Exception], SessionMessage | None],
        on_end: Callable[[], None],
        era: _Era,
        channel: RawChannel | None = None,
    ) -> None:
        self._inner = inner
        self._on_junk = on_junk
        self._on_end = on_end
        self._era = era
        self._channel = channel

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
            while self._channel is not None and self._channel.claim(item):
                item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            if self._channel is not None:
                self._channel.close()
            self._on_end()
            raise
        if isinstance(item, Exception):
            answer = self._on_junk(item)
            if answer is None:
                return item
            if self._channel is not None and self._channel.claim(answer):
                return await self.receive()
            return answer
        if self._era.modern and isinstance(item.message, types.JSONRPCResponse):
            item = _complete_by_default(item)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_capabilities: ContextVar[dict[str, Any] | None] = ContextVar("hanzo_hub_client_capabilities", default=None)


@contextmanager
def client_capabilities(capabilities: dict[str, Any] | None) -> Iterator[None]:
    """Within the block, stateless-era requests sent by this task declare ``capabilities`` as the client's.

    The hub relays for a client: a downstream must see what that client can answer, not what the hub could.
    """
    token = _capabilities.set(capabilities)
    try:
        yield
    finally:
        _capabilities.reset(token)


class _WatchedWriteStream:
    """Delegates to a transport's write stream, declaring the relayed client's capabilities on requests.

    It also notes the era of the requests it sends: stateless-era ones carry the protocol version in ``_meta``,
    ``initialize`` starts the handshake era.
    """

    def __init__(self, inner: WriteStream[SessionMessage], era: _Era) -> None:
        self._inner = inner
        self._era = era

    async def send(self, item: SessionMessage, /) -> None:
        override = _capabilities.get()
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and isinstance(message.params, dict):
            meta = message.params.get("_meta")
            if message.method == "initialize":
                self._era.modern = False
            elif isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta:
                self._era.modern = True
            if override is not None and isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:
                params = {**message.params, "_meta": {**meta, CLIENT_CAPABILITIES_META_KEY: override}}
                item = SessionMessage(message.model_copy(update={"params": params}), metadata=item.metadata)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedWriteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def watched(
    transport: AbstractAsyncContextManager[TransportStreams],
    on_junk: Callable[[Exception], SessionMessage | None],
    on_end: Callable[[], None],
    channel: RawChannel | None = None,
) -> AbstractAsyncContextManager[TransportStreams]:
    """Wrap a transport so the supervisor hears of unparseable lines and of the end of the read side.

    ``on_junk`` may give, for a message the transport could not parse, an answer to put in its place (an error for
    the request it answered, ``backends.broken_answers``); the raw channel takes it if the request is its own.

    The wrapper also declares the relayed client's capabilities and defaults a missing ``resultType`` (see the
    stream classes), and carries ``channel``'s raw requests beside the session.
    """

    bind = getattr(transport, "bind", None)
    if channel is not None and callable(bind):
        bind(channel)  # a transport owning its pipes serves the channel's requests itself (``backends.pipes``)

    @asynccontextmanager
    async def run() -> AsyncIterator[TransportStreams]:
        era = _Era()
        async with transport as (read, write):
            writer = _WatchedWriteStream(write, era)
            if channel is not None:
                channel.attach(writer)
            try:
                yield _WatchedReadStream(read, on_junk, on_end, era, channel), writer
            finally:
                if channel is not None:
                    channel.close()

    return run()
