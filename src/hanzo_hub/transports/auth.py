"""Authentication of HTTP clients: static bearer tokens and OAuth 2.1 JWT access tokens.

Plugs into the SDK's bearer middleware as its ``TokenVerifier``: the SDK answers 401 with ``WWW-Authenticate``
(pointing at the Protected Resource Metadata) and 403 for missing scopes; this module decides whether a token is
valid and whose it is. Static tokens are compared by SHA-256 digest in constant time, so the config never holds
a usable token. JWTs are checked for signature (keys from the issuer's JWKS, fetched over the SDK's httpx2 stack
and cached), issuer, audience, expiry and not-before. Nothing here logs a token or puts one in an error.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from typing import Any

import anyio
import httpx2
import jwt
from mcp.server.auth.provider import AccessToken

from hanzo_hub.config import AuthSettings, OAuthSettings

logger = logging.getLogger(__name__)

JWKS_FETCH_TIMEOUT = 5.0
JWKS_REFRESH_MIN_INTERVAL = 10.0
"""An unknown ``kid`` refetches the JWKS at most this often, so bad tokens cannot hammer the issuer."""


def token_digest(token: str) -> str:
    """The SHA-256 hex digest a static token is stored as."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class _Jwks:
    """The issuer's signing keys, fetched lazily and cached."""

    def __init__(self, settings: OAuthSettings) -> None:
        self._settings = settings
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched = 0.0
        self._lock = anyio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        now = time.monotonic()
        stale = now - self._fetched > self._settings.jwks_cache
        missing = kid not in self._keys if kid else not self._keys
        if stale or (missing and now - self._fetched > JWKS_REFRESH_MIN_INTERVAL):
            await self._refresh()
        if kid is None:
            return next(iter(self._keys.values()), None) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _refresh(self) -> None:
        async with self._lock:
            try:
                async with httpx2.AsyncClient(timeout=JWKS_FETCH_TIMEOUT) as http:
                    response = await http.get(self._settings.jwks_url)
                    response.raise_for_status()
                    document = json.loads(response.content)
                keys: dict[str, jwt.PyJWK] = {}
                for entry in document.get("keys", []):
                    try:
                        parsed = jwt.PyJWK(entry)
                    except jwt.PyJWTError:
                        continue
                    keys[str(entry.get("kid", ""))] = parsed
            except (httpx2.HTTPError, ValueError, AttributeError):
                logger.warning("could not fetch the JWKS of issuer %s", self._settings.issuer)
                return
            finally:
                self._fetched = time.monotonic()
            self._keys = keys


class HubTokenVerifier:
    """Verifies bearer tokens for the SDK's auth middleware; ``AccessToken.subject`` is the user id."""

    def __init__(self, settings: AuthSettings) -> None:
        self._tokens = [(spec.sha256, spec.user) for spec in settings.tokens]
        self._oauth = settings.oauth
        self._jwks = _Jwks(settings.oauth) if settings.oauth is not None else None

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access a token grants, or ``None`` when it is not valid."""
        digest = token_digest(token)
        user = None
        for expected, owner in self._tokens:  # no early exit: every comparison runs, in constant time
            if hmac.compare_digest(digest, expected):
                user = owner
        if user is not None:
            return AccessToken(token=token, client_id=user, scopes=[], subject=user)
        if self._oauth is not None and token.count(".") == 2:
            return await self._verify_jwt(token, self._oauth)
        return None

    async def _verify_jwt(self, token: str, oauth: OAuthSettings) -> AccessToken | None:
        assert self._jwks is not None
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        if header.get("alg") not in oauth.algorithms:
            return None
        key = await self._jwks.key(header.get("kid"))
        if key is None:
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=list(oauth.algorithms),
                audience=oauth.audience,
                issuer=oauth.issuer,
                leeway=oauth.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError:
            return None
        user = claims.get(oauth.user_claim)
        if not isinstance(user, str) or not user:
            return None
        scopes = claims.get("scope", "")
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or user),
            scopes=scopes.split() if isinstance(scopes, str) else [],
            expires_at=int(claims["exp"]),
            resource=oauth.audience,
            subject=user,
            claims={"iss": claims.get("iss")},
        )
