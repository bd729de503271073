"""The interactive OAuth login to a remote server: ``hanzo-hub auth login NAME`` (``hub/auth_cli.py``).

The hub connects to the server the way a desktop client would. The server answers 401; the SDK's provider
discovers its protected resource metadata and authorization server, registers the hub as a client (dynamic client
registration, unless the config names a pre-registered ``client_id``), and sends the user to the authorization URL
(printed, and opened in a browser where there is a display) with PKCE and a ``state``. The authorization server
redirects the browser to a one-shot callback the hub serves on loopback (RFC 8252), the code is exchanged for
tokens, and the server's tool list is fetched to prove they work. The record goes to the vault
(``backends/oauth.py``); serving reads it from there and refreshes it.
"""

from __future__ import annotations

import os
import socket
import sys
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import anyio
import httpx2
import uvicorn
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from hanzo_hub.backends.failures import innermost
from hanzo_hub.backends.http import open_remote, remote_headers
from hanzo_hub.backends.oauth import (
    OAuthRecord,
    OAuthStore,
    RemoteSpec,
    VaultTokenStorage,
    provider,
    registered_for_less,
)
from hanzo_hub.config import HttpServerSpec, HubSettings, SseServerSpec
from hanzo_hub.errors import AuthorizationFailed, ConfigError, HubError
from hanzo_hub.hub.launch import load_secrets

__all__ = ["LoginResult", "browser_opener", "login", "remote_spec"]

CALLBACK_PATH = "/callback"
OpenUrl = Callable[[str], Awaitable[None]]

_PAGE = """<!doctype html><meta charset="utf-8"><title>hanzo-hub</title>
<body style="font-family:sans-serif;margin:3em"><h2>{title}</h2><p>{text}</p></body>"""


@dataclass(frozen=True)
class LoginResult:
    server: str
    record: OAuthRecord | None
    """What was stored; ``None`` when the server never asked for authorization (nothing stored)."""
    tools: int
    registered: bool
    """Whether this login registered a new client (dynamic registration)."""


def remote_spec(settings: HubSettings, server: str) -> RemoteSpec:
    """The configured remote server ``server``.

    Raises:
        ConfigError: no such server, or it is not an ``http``/``sse`` server.
    """
    spec = settings.servers.get(server)
    if spec is None:
        known = ", ".join(sorted(settings.servers)) or "none"
        raise ConfigError(f"no server named {server!r} is configured (configured: {known})")
    if spec.kind not in ("http", "sse"):
        raise ConfigError(f"server {server!r} is a {spec.kind} server; OAuth applies to remote (http, sse) servers")
    assert isinstance(spec, HttpServerSpec | SseServerSpec)
    return spec


def browser_opener(notify: Callable[[str], None]) -> OpenUrl:
    """Opens the URL in a browser where one can show (a display, macOS or Windows); elsewhere the printed URL is the
    way (a console browser must never take over the terminal the command runs in)."""

    async def open_url(url: str) -> None:
        # the session's display is a fact about the terminal, not configuration
        display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")  # noqa: TID251
        graphical = sys.platform in ("darwin", "win32") or bool(display)
        if graphical and not await anyio.to_thread.run_sync(webbrowser.open, url):
            notify("(no browser could be opened: open the URL above yourself)")

    return open_url


class _Callback:
    """The one-shot loopback endpoint the authorization server redirects the browser to."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.error: str | None = None
        self.done = anyio.Event()

    async def handle(self, request: Request) -> HTMLResponse:
        params = request.query_params
        if self.done.is_set():
            return HTMLResponse(_PAGE.format(title="Already done", text="This login has completed."), status_code=409)
        if "error" in params:
            self.error = params["error"] + (f": {params['error_description']}" if "error_description" in params else "")
            self.done.set()
            return HTMLResponse(_PAGE.format(title="Authorization failed", text=self.error), status_code=400)
        if "code" not in params:
            return HTMLResponse(_PAGE.format(title="Not a callback", text="No authorization code."), status_code=400)
        self.result = AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))
        self.done.set()
        return HTMLResponse(_PAGE.format(title="hanzo-hub is authorized", text="You can close this window."))

    async def wait(self, timeout: float) -> AuthorizationCodeResult:
        with anyio.move_on_after(timeout):
            await self.done.wait()
        if self.result is not None:
            return self.result
        if self.error is not None:
            raise AuthorizationFailed(f"the authorization server refused: {self.error}")
        raise AuthorizationFailed(f"no authorization arrived within {timeout:g} s")


def _bind(port: int) -> socket.socket:
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(8)
    except OSError:
        sock.close()
        raise
    return sock


@asynccontextmanager
async def _serving(callback: _Callback, sock: socket.socket) -> AsyncIterator[None]:
    app = Starlette(routes=[Route(CALLBACK_PATH, callback.handle)])
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield
        finally:
            server.should_exit = True


def _callback_socket(spec: RemoteSpec, storage: VaultTokenStorage) -> socket.socket:
    """The loopback socket of the callback: the configured port, else the port the stored registration was made
    with (its redirect URI must match), else any free port (and a new registration)."""
    if spec.oauth is not None and spec.oauth.redirect_port is not None:
        try:
            return _bind(spec.oauth.redirect_port)
        except OSError as exc:
            raise AuthorizationFailed(f"cannot listen on 127.0.0.1:{spec.oauth.redirect_port}: {exc.strerror}") from exc
    client = storage.record.client
    if client is not None and client.redirect_uris:
        port = client.redirect_uris[0].port
        try:
            return _bind(port or 0)
        except OSError:  # taken now: register again with a free port
            storage.record = replace(storage.record, client=None)
    return _bind(0)


async def login(
    settings: HubSettings, server: str, *, open_url: OpenUrl, notify: Callable[[str], None], timeout: float = 300.0
) -> LoginResult:
    """Run the authorization code flow for ``server`` and store what it yields.

    Raises:
        ConfigError: ``server`` is unknown or not remote.
        AuthorizationFailed: denied, timed out, or refused by the authorization server.
        HubError: the server could not be reached or listed after authorizing.
    """
    spec = remote_spec(settings, server)
    secrets = load_secrets(settings)
    storage = VaultTokenStorage(OAuthStore(settings.vault_dir, settings.sandbox.keyring_service), server, spec, secrets)
    await storage.load()
    storage.record = replace(storage.record, tokens=None, expires_at=None)  # a login always asks anew
    if registered_for_less(storage.record, storage.configured):
        storage.record = replace(storage.record, client=None)  # register anew, for the scopes a step-up asked for
    had_client = storage.record.client is not None
    sock = _callback_socket(spec, storage)
    redirect_uri = f"http://127.0.0.1:{sock.getsockname()[1]}{CALLBACK_PATH}"
    callback = _Callback()

    async def redirect(url: str) -> None:
        notify(f"Authorize hanzo-hub for server '{server}' by opening:\n\n  {url}\n")
        await open_url(url)

    auth = provider(storage, spec, redirect_uri, redirect, lambda: callback.wait(timeout))
    headers = remote_headers(spec, secrets)
    try:
        async with _serving(callback, sock):
            tools = await _list_tools(spec, server, headers, auth, settings.backends.connect_timeout)
    except (OAuthFlowError, OAuthTokenError, OAuthRegistrationError) as exc:
        raise AuthorizationFailed(f"OAuth with server '{server}' failed: {exc}") from exc
    except BaseExceptionGroup as group:
        raise _leaf(group, server) from group
    finally:
        sock.close()
    record = storage.record if storage.record.tokens is not None else None
    return LoginResult(server, record, tools, registered=storage.record.client is not None and not had_client)


async def _list_tools(spec: RemoteSpec, server: str, headers: dict[str, str], auth: httpx2.Auth, timeout: float) -> int:
    async with Client(open_remote(spec, server, headers, timeout, auth), mode=spec.protocol) as client:
        return len((await client.list_tools()).tools)


def _leaf(group: BaseExceptionGroup[BaseException], server: str) -> BaseException:
    exc = innermost(group)
    if isinstance(exc, OAuthFlowError | OAuthTokenError | OAuthRegistrationError):
        return AuthorizationFailed(f"OAuth with server '{server}' failed: {exc}")
    if isinstance(exc, HubError):
        return exc
    return AuthorizationFailed(f"server '{server}' could not be reached: {type(exc).__name__}: {exc}")
