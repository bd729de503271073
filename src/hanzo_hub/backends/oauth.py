"""OAuth 2.1 for remote downstream servers (the MCP authorization spec), on the SDK's ``OAuthClientProvider``.

What a login yields (the tokens, their expiry, the client registration and the redirect URI it was registered
with) is one record per server, kept encrypted in the vault under ``oauth.<server>`` and bound to the server's URL:
a record made for another URL is never sent. ``hanzo-hub auth login NAME`` (``hub/auth_cli.py``) runs the
interactive flow and writes the record; serving only reads it and refreshes the tokens, writing the new ones back.
Serving never opens a browser: a server that answers 401 when the hub holds no usable record, or whose refresh
fails, fails its calls with :class:`~hanzo_hub.errors.AuthorizationRequired` naming the command to run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl, PrivateAttr

from hanzo_hub.backends.http_errors import replace_body
from hanzo_hub.config import HttpServerSpec, SseServerSpec
from hanzo_hub.errors import AuthorizationRequired, VaultError
from hanzo_hub.sandbox.vault import Vault, expand_secrets

__all__ = [
    "RECORD_PREFIX",
    "OAuthRecord",
    "OAuthStore",
    "RemoteSpec",
    "VaultTokenStorage",
    "authorization",
    "client_metadata",
    "login_hint",
    "provider",
    "record_name",
    "record_secrets",
    "unauthorized_hook",
]

logger = logging.getLogger(__name__)

RECORD_PREFIX = "oauth."
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
RemoteSpec = HttpServerSpec | SseServerSpec


def record_name(server: str) -> str:
    """The vault name of ``server``'s record; a name the vault cannot hold as is gets a digest suffix."""
    safe = _UNSAFE.sub("_", server)[:100]
    if safe != server:
        safe = f"{safe}-{hashlib.sha256(server.encode()).hexdigest()[:10]}"
    return RECORD_PREFIX + safe


def login_hint(server: str) -> str:
    return f"run `hanzo-hub auth login {server}`"


@dataclass(frozen=True)
class OAuthRecord:
    """What one login holds for one server."""

    url: str
    tokens: OAuthToken | None = None
    expires_at: float | None = None
    """Wall-clock expiry of the access token (``None``: the server gave none)."""
    client: OAuthClientInformationFull | None = None
    """The client registration the flow made (dynamic registration); a pre-registered client comes from config."""
    updated: float = field(default_factory=time.time)
    scope_wanted: str | None = None
    """Scopes the server asked for beyond the token's (a 403 ``insufficient_scope``): the next login asks for them."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "url": self.url,
                "tokens": self.tokens.model_dump(mode="json", exclude_none=True) if self.tokens else None,
                "expires_at": self.expires_at,
                "client": self.client.model_dump(mode="json", exclude_none=True) if self.client else None,
                "updated": self.updated,
                "scope_wanted": self.scope_wanted,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> OAuthRecord:
        """Raises ``ValueError`` (``ValidationError`` included) for a record that does not parse."""
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            raise ValueError("not an OAuth record")
        tokens, client = data.get("tokens"), data.get("client")
        return cls(
            url=data["url"],
            tokens=OAuthToken.model_validate(tokens) if tokens else None,
            expires_at=float(data["expires_at"]) if data.get("expires_at") is not None else None,
            client=OAuthClientInformationFull.model_validate(client) if client else None,
            updated=float(data.get("updated") or 0.0),
            scope_wanted=data.get("scope_wanted") if isinstance(data.get("scope_wanted"), str) else None,
        )

    def secrets(self, label: str) -> dict[str, str]:
        """The credentials in the record (tokens, a client secret), named for redaction as ``label.<what>``."""
        values = {
            "access": self.tokens.access_token if self.tokens else None,
            "refresh": self.tokens.refresh_token if self.tokens else None,
            "client_secret": self.client.client_secret if self.client else None,
        }
        return {f"{label}.{what}": value for what, value in values.items() if value}

    def expires_in(self, now: float | None = None) -> float | None:
        return None if self.expires_at is None else self.expires_at - (time.time() if now is None else now)

    @property
    def refreshable(self) -> bool:
        return bool(self.tokens and self.tokens.refresh_token)

    def usable(self, url: str, now: float | None = None) -> bool:
        """Whether serving ``url`` can use this record: made for that URL, with a token that is unexpired or can
        be refreshed."""
        left = self.expires_in(now)
        return self.url == url and self.tokens is not None and (left is None or left > 0 or self.refreshable)

    def summary(self, now: float | None = None) -> str:
        """The token's expiry, refreshability and scope, in words."""
        left = self.expires_in(now)
        if left is None:
            parts = ["the token does not expire"]
        elif left > 0:
            parts = [f"the token expires in {_duration(left)}"]
        else:
            parts = [f"the token expired {_duration(-left)} ago"]
        parts.append(
            "refreshed automatically" if self.refreshable else "no refresh token: log in again when it expires"
        )
        if self.tokens is not None and self.tokens.scope:
            parts.append(f"scope {self.tokens.scope}")
        return ", ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def record_secrets(secrets: Mapping[str, str]) -> dict[str, str]:
    """The credentials inside the OAuth records among the vault's values, for the hub's redactor (a record is one
    JSON value; redacting it whole would miss the token a server echoes back)."""
    out: dict[str, str] = {}
    for name, value in secrets.items():
        if name.startswith(RECORD_PREFIX):
            try:
                out.update(OAuthRecord.from_json(value).secrets(name))
            except ValueError:
                continue
    return out


class OAuthStore:
    """The servers' OAuth records in the vault; the vault is opened on first use, off the event loop."""

    def __init__(self, vault_dir: Path, keyring_service: str | None) -> None:
        self._dir = vault_dir
        self._keyring = keyring_service
        self._vault: Vault | None = None

    def _open(self) -> Vault:
        if self._vault is None:
            self._vault = Vault(self._dir, keyring_service=self._keyring)
        return self._vault

    def modified(self) -> int:
        """The vault file's modification time (ns; 0 while there is none): a cheap test of whether it changed."""
        try:
            return (self._dir / "secrets.json").stat().st_mtime_ns
        except OSError:
            return 0

    def load_sync(self, server: str) -> OAuthRecord | None:
        """``server``'s record; ``None`` when there is none or it does not parse (logged).

        Raises:
            VaultError: the vault cannot be read.
        """
        if not (self._dir / "secrets.json").is_file():
            return None
        text = self._open().get(record_name(server))
        if text is None:
            return None
        try:
            return OAuthRecord.from_json(text)
        except ValueError:
            logger.warning("OAuth record of server %s is not readable; ignoring it (%s)", server, login_hint(server))
            return None

    def save_sync(self, server: str, record: OAuthRecord) -> None:
        self._open().set(record_name(server), record.to_json())

    def delete_sync(self, server: str) -> bool:
        if not (self._dir / "secrets.json").is_file():
            return False
        return self._open().delete(record_name(server))

    async def load(self, server: str) -> OAuthRecord | None:
        return await anyio.to_thread.run_sync(self.load_sync, server)

    async def save(self, server: str, record: OAuthRecord) -> None:
        await anyio.to_thread.run_sync(self.save_sync, server, record)


class VaultTokenStorage:
    """The SDK's ``TokenStorage`` for one server, on its vault record; a configured client wins over a stored one."""

    def __init__(
        self,
        store: OAuthStore,
        server: str,
        spec: RemoteSpec,
        secrets: Mapping[str, str],
        learn: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.server = server
        self.url = spec.url
        self.configured = _configured_client(spec, secrets)
        """The client registered by hand in the config (``oauth.client_id``), else ``None`` (dynamic registration)."""
        self._learn = learn
        self.record: OAuthRecord = OAuthRecord(url=spec.url)

    def _teach(self) -> None:
        """Hand the record's credentials to the hub's redactor (``learn``), so none reaches a client or a model."""
        if self._learn is not None:
            for name, value in self.record.secrets(record_name(self.server)).items():
                self._learn(name, value)

    async def load(self) -> OAuthRecord:
        """Read the record (one made for another URL counts as none) and keep it."""
        record = await self.store.load(self.server)
        self.record = record if record is not None and record.url == self.url else OAuthRecord(url=self.url)
        self._teach()
        return self.record

    async def get_tokens(self) -> OAuthToken | None:
        return self.record.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self.record = replace(self.record, tokens=tokens, expires_at=expires_at, updated=time.time())
        self._teach()
        try:
            await self.store.save(self.server, self.record)
        except VaultError as exc:  # the tokens still work for this connection; the next start logs in again
            logger.warning("server %s: new OAuth tokens could not be saved: %s", self.server, exc)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        configured, stored = self.configured, self.record.client
        if configured is not None and stored is not None and _same_client(configured, stored):
            return stored  # the configured client, as it was last used (its token endpoint method, learned)
        return configured or stored

    async def want_scope(self, scope: str) -> None:
        """Keep ``scope`` for the next login (a step-up the stored token cannot serve)."""
        self.record = replace(
            self.record, scope_wanted=union_scopes(self.record.scope_wanted, scope), updated=time.time()
        )
        try:
            await self.store.save(self.server, self.record)
        except VaultError as exc:
            logger.warning("server %s: the scopes it asks for could not be saved: %s", self.server, exc)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.record = replace(self.record, client=client_info, updated=time.time())
        await self.store.save(self.server, self.record)


LOGIN_NEEDED = "hanzo-hub/login-needed"
"""``error.data.reason`` of the JSON-RPC error a step-up answers its request with (see :class:`_ServingProvider`)."""


def union_scopes(*scopes: str | None) -> str:
    """Space-separated scopes, each once, in the order first seen."""
    return " ".join(dict.fromkeys(word for scope in scopes if scope for word in scope.split()))


def _same_client(a: OAuthClientInformationFull, b: OAuthClientInformationFull) -> bool:
    return a.client_id == b.client_id and a.client_secret == b.client_secret


def _configured_client(spec: RemoteSpec, secrets: Mapping[str, str]) -> OAuthClientInformationFull | None:
    if spec.oauth is None or spec.oauth.client_id is None:
        return None
    secret = spec.oauth.client_secret
    value = expand_secrets(secret.get_secret_value(), secrets) if secret is not None else None
    return OAuthClientInformationFull(
        client_id=spec.oauth.client_id,
        client_secret=value,
        token_endpoint_auth_method="client_secret_post" if value else "none",
        redirect_uris=None,
    )


def client_metadata(spec: RemoteSpec, redirect_uri: str) -> OAuthClientMetadata:
    """What the hub registers as (dynamic registration) and asks for."""
    settings = spec.oauth
    secret = settings is not None and settings.client_secret is not None
    return OAuthClientMetadata(
        client_name=settings.client_name if settings else "hanzo-hub",
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="client_secret_post" if secret else "none",
        scope=settings.scope if settings else None,
    )


class _WidenedMetadata(OAuthClientMetadata):
    """Client metadata whose scope always keeps the scopes a step-up asked for (SEP-2350: a union). The SDK sets the
    scope anew from each 401's challenge, just before it registers a client and authorizes."""

    _floor: str = PrivateAttr(default="")

    @classmethod
    def widen(cls, metadata: OAuthClientMetadata, scope: str) -> _WidenedMetadata:
        widened = cls.model_validate(metadata.model_dump())
        widened._floor = scope
        widened.scope = metadata.scope
        return widened

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "scope" and self._floor:
            value = union_scopes(value, self._floor)
        super().__setattr__(name, value)


def registered_for_less(record: OAuthRecord, configured: OAuthClientInformationFull | None) -> bool:
    """Whether the record's dynamically registered client was registered for fewer scopes than a step-up asked for:
    an authorization server may refuse it any scope beyond its registration, so a login registers anew."""
    client, wanted = record.client, record.scope_wanted
    if client is None or not wanted or client.scope is None or configured is not None:
        return False
    if client.client_id is not None and client.client_id.startswith(("https://", "http://")):
        return False  # a Client ID Metadata Document: the authorization server reads its scope from the document
    return not set(wanted.split()) <= set(client.scope.split())


class _Provider(OAuthClientProvider):
    """The SDK's provider, told the stored token's real expiry: it loads stored tokens without one, and would send
    an expired access token (then start a new authorization on the 401) instead of refreshing it first."""

    def __init__(self, storage: VaultTokenStorage, **kwargs: Any) -> None:
        super().__init__(storage=storage, **kwargs)
        self._vault_storage = storage

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.context.current_tokens is not None:
            self.context.token_expiry_time = self._vault_storage.record.expires_at

    async def _authenticate_as_supported(self) -> None:
        """A client registered by hand authenticates at the token endpoint the way the authorization server's
        metadata says it accepts (``token_endpoint_auth_methods_supported``; where the hub has not read it, as it
        last did). The method is kept with the login, for the refreshes of later connections."""
        info, configured = self.context.client_info, self._vault_storage.configured
        metadata = self.context.oauth_metadata
        supported = metadata.token_endpoint_auth_methods_supported if metadata is not None else None
        if info is None or configured is None or not info.client_secret or not _same_client(info, configured):
            return
        if not supported or info.token_endpoint_auth_method in supported:
            return
        method = next((m for m in ("client_secret_basic", "client_secret_post") if m in supported), None)
        if method is not None:
            self.context.client_info = info.model_copy(update={"token_endpoint_auth_method": method})
            await self._vault_storage.set_client_info(self.context.client_info)

    async def _exchange_token_authorization_code(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        await self._authenticate_as_supported()
        return await super()._exchange_token_authorization_code(auth_code, code_verifier)

    async def _refresh_token(self) -> httpx2.Request:
        await self._authenticate_as_supported()
        return await super()._refresh_token()


class _ServingProvider(_Provider):
    """The provider a serving connection uses. Where the SDK would start a new authorization (a 401 to a token the
    hub held), it tries the refresh token once instead (a server that dropped its access tokens, or revoked one
    early, usually still honours the refresh token); where that is not possible or is refused, it raises
    :class:`AuthorizationRequired` naming the login command. It never sends anyone to a browser.

    A 403 ``insufficient_scope`` (a step-up) needs a new login for more scopes: the scopes are kept with the login,
    ``login_needed`` is told, and (``in_place``, as the hub serves both remote transports) the request alone fails,
    with a JSON-RPC error marked :data:`LOGIN_NEEDED` in place of the server's answer, while the connection and the
    other requests on it go on (over legacy SSE ``sse_posts`` hands that error to the session); once the vault
    changes (a login), the next request reloads the tokens. Without ``in_place`` it raises
    :class:`AuthorizationRequired` and the connection ends."""

    def __init__(
        self,
        storage: VaultTokenStorage,
        server: str,
        login_needed: Callable[[], None] | None = None,
        *,
        in_place: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(storage, **kwargs)
        self._server = server
        self._refreshed_on_401 = False
        self._login_needed = login_needed
        self._in_place = in_place
        self._step_up = False
        self._awaiting_login: int | None = None
        """The vault's modification time when a step-up asked for a login (``None``: none pending)."""

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        # The SDK's flow, watched for a 403 insufficient_scope: that is a step-up, which no refresh can grant.
        if self._awaiting_login is not None and self._vault_storage.store.modified() != self._awaiting_login:
            await self._reload()
        flow = super()._auth_flow(request)
        try:
            sent = await flow.__anext__()
            while True:
                response = yield sent
                if (
                    response.status_code == 403
                    and extract_field_from_www_auth(response, "error") == "insufficient_scope"
                ):
                    if self._in_place:
                        wanted = self._wanted(response)
                        await self._stepped_up(wanted)
                        replace_body(response, request, self._step_up_message(wanted), {"reason": LOGIN_NEEDED})
                        return
                    self._step_up = True
                sent = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:  # closed here, in this task: the SDK's flow holds its lock across the yields
            await flow.aclose()

    def _wanted(self, response: httpx2.Response) -> str:
        """What a step-up asks for: the scopes asked for and granted so far, with the challenged ones (SEP-2350)."""
        granted = self.context.current_tokens.scope if self.context.current_tokens else None
        return union_scopes(self.context.client_metadata.scope, granted, extract_field_from_www_auth(response, "scope"))

    def _step_up_message(self, wanted: str) -> str:
        return f"the server asks for more scopes ({wanted}); {login_hint(self._server)}"

    async def _stepped_up(self, wanted: str) -> None:
        """Keep the scopes with the login, so a login through the client (or `hanzo-hub auth login`) asks for all
        of them, and say that a login is needed."""
        await self._vault_storage.want_scope(wanted)
        self._awaiting_login = self._vault_storage.store.modified()
        if self._login_needed is not None:
            self._login_needed()

    async def _reload(self) -> None:
        """The vault changed since a step-up: take the login it may hold now (the SDK reads it on its next request)."""
        async with self.context.lock:
            try:
                await self._vault_storage.load()
            except VaultError as exc:
                logger.warning("server %s: OAuth record unreadable: %s", self._server, exc)
                return
            self._awaiting_login = None
            self._initialized = False

    async def _perform_authorization(self) -> httpx2.Request:
        tokens = self.context.current_tokens
        if self._step_up:  # legacy SSE (see the class): the SDK put the union in the client metadata
            self._step_up = False
            wanted = self.context.client_metadata.scope or ""
            await self._stepped_up(wanted)
            raise AuthorizationRequired(self._step_up_message(wanted))
        if tokens is not None and tokens.refresh_token and self.context.client_info and not self._refreshed_on_401:
            self._refreshed_on_401 = True
            return await self._refresh_token()
        raise AuthorizationRequired(f"the server no longer accepts the stored login; {login_hint(self._server)}")

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        # The only token request a serving connection makes here is the refresh above: handled as a refresh, so a
        # server that does not rotate refresh tokens (and omits it from the answer) keeps the one the hub has.
        if not await self._handle_refresh_response(response):
            raise AuthorizationRequired(
                f"the server no longer accepts the stored login and refused its refresh (HTTP "
                f"{response.status_code}); {login_hint(self._server)}"
            )


def provider(
    storage: VaultTokenStorage,
    spec: RemoteSpec,
    redirect_uri: str,
    redirect_handler: Callable[[str], Awaitable[None]],
    callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
) -> OAuthClientProvider:
    """An ``httpx2.Auth`` running the interactive MCP authorization flow for ``spec`` with ``storage`` (a login)."""
    metadata = client_metadata(spec, redirect_uri)
    if storage.record.scope_wanted:
        metadata = _WidenedMetadata.widen(metadata, storage.record.scope_wanted)
    return _Provider(
        storage,
        server_url=spec.url,
        client_metadata=metadata,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=spec.oauth.client_metadata_url if spec.oauth is not None else None,
    )


def _redirect_uri(storage: VaultTokenStorage) -> str:
    client = storage.record.client
    if client is not None and client.redirect_uris:
        return str(client.redirect_uris[0])
    return "http://127.0.0.1/callback"  # never used: serving never authorizes anew


async def authorization(
    spec: RemoteSpec,
    server: str,
    store: OAuthStore | None,
    secrets: Mapping[str, str],
    learn: Callable[[str, str], None] | None = None,
    login_needed: Callable[[], None] | None = None,
) -> httpx2.Auth | None:
    """The auth a serving connection to ``spec`` uses: the OAuth provider when the hub holds a login for it, else
    ``None`` (the connection then gets :func:`unauthorized_hook`). Never interactive. ``learn`` receives every
    credential it loads or obtains, for redaction; ``login_needed`` is told when the server asks for scopes the login
    lacks (a step-up: only a new login grants them)."""
    if store is None or any(name.lower() == "authorization" for name in spec.headers):
        return None
    storage = VaultTokenStorage(store, server, spec, secrets, learn)
    try:
        record = await storage.load()
    except VaultError as exc:
        logger.warning("server %s: OAuth record unreadable: %s", server, exc)
        return None
    if record.tokens is None:
        return None
    return _ServingProvider(
        storage,
        server,
        login_needed,
        in_place=True,  # streamable HTTP answers with the body; legacy SSE through ``sse_posts``
        server_url=spec.url,
        client_metadata=client_metadata(spec, _redirect_uri(storage)),
        client_metadata_url=spec.oauth.client_metadata_url if spec.oauth is not None else None,
    )


def unauthorized_hook(server: str) -> Callable[[httpx2.Response], Awaitable[None]]:
    """An httpx response hook for a connection without OAuth: a 401 becomes :class:`AuthorizationRequired`."""

    async def hook(response: httpx2.Response) -> None:
        if response.status_code == 401:
            raise AuthorizationRequired(f"the server answered HTTP 401; {login_hint(server)}")

    return hook
