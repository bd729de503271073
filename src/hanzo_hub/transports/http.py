"""The streamable HTTP endpoint of the hub (both protocol eras) with its transport security."""

from __future__ import annotations

from typing import Any

from mcp.server.auth.settings import AuthSettings as SdkAuthSettings
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

from hanzo_hub.config import AuthSettings, HttpSettings
from hanzo_hub.errors import ConfigError
from hanzo_hub.transports.auth import HubTokenVerifier

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def transport_security(settings: HttpSettings) -> TransportSecuritySettings | None:
    """Host/Origin checks against DNS rebinding: on for loopback binds and whenever hosts are configured."""
    hosts = list(settings.allowed_hosts)
    origins = list(settings.allowed_origins)
    if settings.host in LOOPBACK_HOSTS:
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if not hosts:
        return None
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def check_bind(settings: HttpSettings, auth: AuthSettings) -> None:
    """Refuse to serve a non-loopback address to everyone.

    Raises:
        ConfigError: the bind address is not loopback and no authentication is configured.
    """
    if settings.host not in LOOPBACK_HOSTS and not auth.enabled:
        raise ConfigError(
            f"refusing to serve http on {settings.host} without authentication: configure auth.tokens or "
            "auth.oauth, or bind 127.0.0.1"
        )


def resource_url(settings: HttpSettings, auth: AuthSettings) -> str:
    """The hub's resource identifier: the OAuth audience when it is a URL, else the endpoint's own URL."""
    if auth.oauth is not None and auth.oauth.audience.startswith(("http://", "https://")):
        return auth.oauth.audience
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"http://{host}:{settings.port}{settings.path}"


def _sdk_auth(settings: HttpSettings, auth: AuthSettings) -> tuple[SdkAuthSettings | None, HubTokenVerifier | None]:
    if not auth.enabled:
        return None, None
    resource = resource_url(settings, auth)
    oauth = auth.oauth
    # Strings, not AnyHttpUrl objects: the SDK's model keeps a path-less issuer without a trailing slash, and
    # RFC 8414 compares issuers as exact strings. Protected Resource Metadata only makes sense with an
    # authorization server to point at, so static tokens alone get none.
    sdk = SdkAuthSettings.model_validate(
        {
            "issuer_url": oauth.issuer if oauth else resource,
            "resource_server_url": resource if oauth else None,
            "required_scopes": list(oauth.required_scopes) if oauth else None,
            "validate_token_resource": False,  # HubTokenVerifier checks the audience itself
        }
    )
    return sdk, HubTokenVerifier(auth)


def mcp_app(
    server: Server[Any], settings: HttpSettings, auth: AuthSettings | None = None, routes: list[Route] | None = None
) -> Starlette:
    """The SDK's streamable HTTP app for ``server`` at ``settings.path``; ``server.session_manager`` must run.

    ``routes`` are served by the same app, behind the same authentication middleware.
    """
    sdk_auth, verifier = _sdk_auth(settings, auth or AuthSettings())
    return server.streamable_http_app(
        streamable_http_path=settings.path,
        json_response=settings.json_response,
        stateless_http=settings.stateless,
        max_request_body_size=settings.max_body_bytes,
        max_sessions=settings.max_sessions,
        transport_security=transport_security(settings),
        host=settings.host,
        auth=sdk_auth,
        token_verifier=verifier,
        custom_starlette_routes=routes,
    )
