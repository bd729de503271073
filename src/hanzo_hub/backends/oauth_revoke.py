"""Revoking a login's tokens at the authorization server (OAuth 2.0 Token Revocation, RFC 7009).

``hanzo-hub auth logout NAME`` forgets the vault's record; a grant the server still honours would outlive that, so
the hub first asks the server to revoke it. The revocation endpoint is found the way the login found the
authorization server: protected resource metadata (RFC 9728) names the authorization server, whose metadata
(RFC 8414, or OpenID discovery) advertises ``revocation_endpoint``; the SDK builds both lists of discovery URLs.
The refresh token goes first (revoking it ends the grant at most servers, RFC 7009 section 2.1), then the access
token, each authenticated as the client that obtained it (``client_secret_basic``, ``client_secret_post`` or a
public client's ``client_id``; an empty ``client_secret`` is added on a retry for servers that insist on the key).
Tokens are sent only over HTTPS, or plain HTTP to a loopback host.
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote_plus, urlparse

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    handle_auth_metadata_response,
    handle_protected_resource_response,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

__all__ = ["Revocation", "revoke"]


@dataclass(frozen=True)
class Revocation:
    """What a revocation did: ``revoked`` (every token the login held), ``unsupported`` (the server offers no way,
    or none the hub may use) or ``failed`` (the server or the network refused); the endpoint, the token kinds
    revoked, and why it stopped short, if it did."""

    outcome: Literal["revoked", "unsupported", "failed"]
    endpoint: str | None = None
    revoked: tuple[str, ...] = ()
    problem: str | None = None


def _safe(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme == "https":
        return True
    host = parsed.hostname or ""
    if parsed.scheme != "http":
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _basic(client_id: str, secret: str) -> str:
    """HTTP Basic client authentication, each part form-urlencoded first (RFC 6749 section 2.3.1)."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


async def _metadata(http: httpx2.AsyncClient, server_url: str) -> OAuthMetadata | None:
    auth_server: str | None = None
    for url in build_protected_resource_metadata_discovery_urls(None, server_url):
        resource = await handle_protected_resource_response(await http.get(url))
        if resource is not None:
            auth_server = str(resource.authorization_servers[0])
            break
    for url in build_oauth_authorization_server_metadata_discovery_urls(auth_server, server_url):
        go_on, metadata = await handle_auth_metadata_response(await http.get(url))
        if metadata is not None:
            return metadata
        if not go_on:
            return None
    return None


async def revoke(
    server_url: str,
    tokens: OAuthToken,
    client: OAuthClientInformationFull | None,
    *,
    timeout: float = 10.0,
) -> Revocation:
    """Revoke ``tokens`` at the authorization server of ``server_url``, as ``client``. Never raises for what the
    network or the server does: the :class:`Revocation` says how far it got. The server's configured headers are
    not sent: the authorization server may be another origin."""
    if client is None or client.client_id is None:
        return Revocation("unsupported", problem="the login holds no client registration to revoke as")
    endpoint: str | None = None
    revoked: list[str] = []
    try:
        async with httpx2.AsyncClient(timeout=timeout) as http:
            metadata = await _metadata(http, server_url)
            if metadata is None:
                return Revocation("unsupported", problem="the server's authorization metadata could not be found")
            if metadata.revocation_endpoint is None:
                return Revocation("unsupported", problem="the authorization server offers no revocation endpoint")
            endpoint = str(metadata.revocation_endpoint)
            if not _safe(endpoint):
                return Revocation(
                    "unsupported", endpoint, problem="its revocation endpoint is not HTTPS; no token was sent"
                )
            for kind, token in (("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token)):
                if not token:
                    continue
                form = {"token": token, "token_type_hint": kind, "client_id": client.client_id}
                headers: dict[str, str] = {}
                if client.client_secret and client.token_endpoint_auth_method == "client_secret_basic":
                    headers["Authorization"] = _basic(client.client_id, client.client_secret)
                elif client.client_secret:
                    form["client_secret"] = client.client_secret
                response = await http.post(endpoint, data=form, headers=headers)
                if response.status_code == 400 and "client_secret" not in form and "client_secret" in response.text:
                    # Authorization servers on the MCP Python SDK's routes want the key even from a public client
                    # (their request model lacks a default; python-sdk issue 3508): an empty one satisfies them.
                    response = await http.post(endpoint, data={**form, "client_secret": ""}, headers=headers)
                if response.status_code != 200:
                    detail = response.text[:200].strip()
                    return Revocation(
                        "failed",
                        endpoint,
                        tuple(revoked),
                        f"revoking the {kind.replace('_', ' ')} answered HTTP "
                        f"{response.status_code}{': ' + detail if detail else ''}",
                    )
                revoked.append(kind)
    except httpx2.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        return Revocation(
            "failed", endpoint, tuple(revoked), f"the authorization server could not be reached: {reason}"
        )
    return Revocation("revoked", endpoint, tuple(revoked))
