"""Auth tools: JWT decode/verify/sign (PyJWT) and OAuth2 token requests (client credentials, refresh, RFC 7662
introspection). Secrets may be given inline or, better, as the name of an environment variable the hub's vault
injects at launch (``*_env`` arguments), so they never appear in the conversation."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from typing import Annotated, Any, Literal

import jwt
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result
from servers.api import net
from servers.api.net import DEFAULT_TIMEOUT, Url
from servers.api.net import Timeout as TimeoutArg

LOCAL = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
TOKEN = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)
READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)

Algorithm = Literal["HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA"]
Token = Annotated[str, Field(min_length=10, description="the JWT (header.payload.signature)")]
Secret = Annotated[str, Field(description="the secret inline (prefer the *_env argument); '' = not given")]
SecretEnv = Annotated[
    str | None, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="environment variable holding the secret")
]
ClientAuth = Literal["basic", "body"]


def secret(value: str | None, env: str | None, what: str, *, required: bool = True) -> str | None:
    """The secret given inline or read from the named environment variable."""
    value = value or None
    if value is not None and env is not None:
        raise ToolError(f"give the {what} inline or as an environment variable name, not both")
    if env is not None:
        found = os.environ.get(env)  # noqa: TID251 - secrets arrive as env vars injected by the hub's vault
        if found is None:
            raise ToolError(f"environment variable {env} is not set (the {what})")
        return found
    if value is None and required:
        raise ToolError(f"the {what} is needed: pass it or the name of the environment variable holding it")
    return value


def _claims_view(claims: dict[str, Any]) -> dict[str, Any]:
    now = time.time()
    view: dict[str, Any] = {}
    for key in ("exp", "nbf", "iat"):
        if isinstance(claims.get(key), int | float):
            view[key] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(claims[key]))
    if isinstance(claims.get("exp"), int | float):
        view["expired"] = claims["exp"] < now
        view["secondsLeft"] = int(claims["exp"] - now)
    return view


async def _token_request(
    url: str, form: dict[str, str], client_id: str, client_secret: str | None, auth: ClientAuth, timeout: float
) -> dict[str, Any]:
    headers = {"Accept": "application/json"}
    if auth == "basic":
        pair = f"{client_id}:{client_secret or ''}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    else:
        form = {**form, "client_id": client_id, **({"client_secret": client_secret} if client_secret else {})}
    async with net.client(timeout) as http:
        fetched = await net.fetch(http, "POST", url, data=form, headers=headers)
    body = fetched.json() if "json" in fetched.content_type else {"raw": fetched.text()}
    if fetched.status >= 400:
        problem = body.get("error_description") or body.get("error") or fetched.text()[:200]
        raise ToolError(f"token endpoint {url} answered {fetched.status}: {problem}")
    if not isinstance(body, dict):
        raise ToolError(f"token endpoint {url} did not answer a JSON object")
    return body


def _token_result(body: dict[str, Any]) -> CallToolResult:
    """Token response with the secrets shortened in the text (the structured content keeps them for reuse)."""
    out = dict(body)
    access = out.get("access_token")
    if isinstance(access, str) and access.count(".") == 2:
        with contextlib.suppress(jwt.PyJWTError):
            out["accessTokenClaims"] = jwt.decode(access, options={"verify_signature": False})
    shown = {k: (f"{v[:8]}…" if k.endswith("token") and isinstance(v, str) else v) for k, v in out.items()}
    return json_result(out, text=json.dumps(shown, indent=1))


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the JWT and OAuth2 tools to ``mcp``."""

    @mcp.tool(
        annotations=LOCAL,
        description="Decode a JWT without checking its signature: header (alg, kid), claims, and the expiry in "
        "readable form (expired, seconds left). Use to inspect a token; use jwt_verify to trust it.",
    )
    async def jwt_decode(token: Token) -> CallToolResult:
        try:
            header = jwt.get_unverified_header(token)
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as exc:
            raise ToolError(f"not a decodable JWT: {exc}") from exc
        return json_result({"header": header, "claims": claims, **_claims_view(claims)})

    @mcp.tool(
        annotations=LOCAL,
        description="Verify a JWT's signature and claims with a key (HMAC secret or PEM public key): checks exp, "
        "nbf, and audience/issuer when given. Returns valid and the claims, or valid=false with the reason.",
    )
    async def jwt_verify(
        token: Token,
        algorithms: Annotated[list[Algorithm], Field(min_length=1)],
        key: Secret = "",
        key_env: SecretEnv = None,
        audience: str | None = None,
        issuer: str | None = None,
        leeway: Annotated[int, Field(ge=0, le=3600, description="seconds of clock skew allowed")] = 0,
    ) -> CallToolResult:
        material = secret(key, key_env, "verification key") or ""
        try:
            claims = jwt.decode(token, material, algorithms=list(algorithms), audience=audience, issuer=issuer,
                                leeway=leeway, options={"verify_aud": audience is not None})  # fmt: skip
        except jwt.InvalidKeyError as exc:
            raise ToolError(f"the key does not fit the algorithm: {exc}") from exc
        except jwt.PyJWTError as exc:
            return json_result({"valid": False, "reason": f"{type(exc).__name__}: {exc}"})
        return json_result({"valid": True, "claims": claims, **_claims_view(claims)})

    @mcp.tool(
        annotations=LOCAL,
        description="Sign claims into a JWT with an HMAC secret or a PEM private key. expires_in adds exp (and "
        "iat); extra header fields (kid) allowed. Use to mint test tokens for an API.",
    )
    async def jwt_sign(
        claims: Annotated[dict[str, Any], Field(description="the payload claims")],
        algorithm: Algorithm = "HS256",
        key: Secret = "",
        key_env: SecretEnv = None,
        expires_in: Annotated[int | None, Field(ge=1, le=31_536_000, description="seconds until exp")] = None,
        headers: Annotated[dict[str, Any] | None, Field(description="extra JOSE header fields, e.g. kid")] = None,
    ) -> CallToolResult:
        material = secret(key, key_env, "signing key") or ""
        payload = dict(claims)
        if expires_in:
            now = int(time.time())
            payload.setdefault("iat", now)
            payload["exp"] = now + expires_in
        try:
            token = jwt.encode(payload, material, algorithm=algorithm, headers=headers)
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise ToolError(f"cannot sign with {algorithm}: {exc}") from exc
        return json_result({"token": token, "claims": payload}, text=token)

    @mcp.tool(
        annotations=TOKEN,
        description="Get an OAuth2 access token with the client-credentials grant (machine-to-machine) from a token "
        "endpoint; the client authenticates with HTTP Basic or in the body. Returns the token response "
        "(access_token, expires_in, scope), with the claims when the token is a JWT.",
    )
    async def oauth2_client_credentials(
        token_url: Url,
        client_id: Annotated[str, Field(min_length=1)],
        client_secret: Secret = "",
        client_secret_env: SecretEnv = None,
        scope: Annotated[str | None, Field(description="space-separated scopes")] = None,
        audience: str | None = None,
        client_auth: ClientAuth = "basic",
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        resolved = secret(client_secret, client_secret_env, "client secret")
        form = {"grant_type": "client_credentials"}
        if scope:
            form["scope"] = scope
        if audience:
            form["audience"] = audience
        return _token_result(await _token_request(token_url, form, client_id, resolved, client_auth, timeout))

    @mcp.tool(
        annotations=TOKEN,
        description="Exchange an OAuth2 refresh token for a new access token (refresh_token grant). Returns the new "
        "token response; servers that rotate refresh tokens return a new refresh_token too.",
    )
    async def oauth2_refresh(
        token_url: Url,
        client_id: Annotated[str, Field(min_length=1)],
        refresh_token: Secret = "",
        refresh_token_env: SecretEnv = None,
        client_secret: Secret = "",
        client_secret_env: SecretEnv = None,
        scope: str | None = None,
        client_auth: ClientAuth = "basic",
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        refresh = secret(refresh_token, refresh_token_env, "refresh token")
        resolved = secret(client_secret, client_secret_env, "client secret", required=False)
        form = {"grant_type": "refresh_token", "refresh_token": refresh or ""}
        if scope:
            form["scope"] = scope
        return _token_result(await _token_request(token_url, form, client_id, resolved, client_auth, timeout))

    @mcp.tool(
        annotations=READ,
        description="Ask an OAuth2 introspection endpoint (RFC 7662) whether a token is active and what it grants "
        "(scope, client_id, sub, exp). Returns the endpoint's answer.",
    )
    async def oauth2_introspect(
        introspection_url: Url,
        token: Annotated[str, Field(min_length=1)],
        client_id: Annotated[str, Field(min_length=1)],
        client_secret: Secret = "",
        client_secret_env: SecretEnv = None,
        token_type_hint: Literal["access_token", "refresh_token"] | None = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        resolved = secret(client_secret, client_secret_env, "client secret")
        form = {"token": token, **({"token_type_hint": token_type_hint} if token_type_hint else {})}
        body = await _token_request(introspection_url, form, client_id, resolved, "basic", timeout)
        if "active" not in body:
            raise ToolError(f"{introspection_url} did not answer an introspection response (no 'active')")
        return json_result({**body, **_claims_view(body)})
