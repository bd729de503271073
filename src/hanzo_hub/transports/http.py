"""The streamable HTTP endpoint of the hub (both protocol eras) with its transport security."""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from hanzo_hub.config import HttpSettings

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


def mcp_app(server: Server[Any], settings: HttpSettings) -> Starlette:
    """The SDK's streamable HTTP app for ``server`` at ``settings.path``; ``server.session_manager`` must run."""
    return server.streamable_http_app(
        streamable_http_path=settings.path,
        json_response=settings.json_response,
        stateless_http=settings.stateless,
        max_request_body_size=settings.max_body_bytes,
        max_sessions=settings.max_sessions,
        transport_security=transport_security(settings),
        host=settings.host,
    )
