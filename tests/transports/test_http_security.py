"""Security of the HTTP endpoint against a real hub process: tokens, JWTs from a real JWKS server, Origin, sizes.

Every rejected request must leave the downstream untouched: the fixture server is never started (``/healthz``
reports nothing running), and no token appears in the hub's log.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from hanzo_hub.backends.listing import fetch_listing
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.transports.auth import token_digest
from tests.fixtures.downstream import build

REPO = Path(__file__).resolve().parents[2]
STATIC_TOKEN = "static-token-for-tests-0123456789"
ISSUER = "https://issuer.test"
AUDIENCE = "https://hub.test/mcp"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Keys:
    good: rsa.RSAPrivateKey
    other: rsa.RSAPrivateKey


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys(rsa.generate_private_key(65537, 2048), rsa.generate_private_key(65537, 2048))


@pytest.fixture(scope="module")
def jwks_url(keys: Keys) -> Iterator[str]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys.good.public_key()))
    body = json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/jwks.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


def _token(key: rsa.RSAPrivateKey, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300, **claims}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": "k1"})


@dataclass
class RunningHub:
    url: str
    base: str
    log: Path


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, "hub exited early"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError("hub did not listen")


async def _snapshot(home: Path) -> None:
    """Give the hub a snapshot of the fixture's lists, so nothing starts unless a call gets through."""
    async with Client(build("fx")) as client:
        listing = await fetch_listing(client, 10)
    SnapshotStore(home / "snapshots").save("fx", listing)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, jwks_url: str) -> Iterator[RunningHub]:
    home = tmp_path_factory.mktemp("secure-hub")
    anyio.run(_snapshot, home)
    config = {
        "mcpServers": {"fx": {"command": sys.executable, "args": ["-m", "tests.fixtures.downstream", "ok", "fx"]}},
        "auth": {
            "tokens": [{"user": "bob", "sha256": token_digest(STATIC_TOKEN)}],
            "oauth": {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": jwks_url, "leeway": 0},
        },
        "http": {"max_body_bytes": 65536},
        "backends": {"list_wait": 0},
        # module-scoped: started before the per-test memory-off variable exists, so off here explicitly
        "memory": {"enabled": False},
    }
    (home / "hub.json").write_text(json.dumps(config))
    port = _free_port()
    log = home / "hub.log"
    cmd = [
        sys.executable,
        "-m",
        "hanzo_hub",
        "serve",
        "--http",
        "--port",
        str(port),
        "--config",
        str(home / "hub.json"),
    ]
    proc = subprocess.Popen([*cmd, "--home", str(home), "--log-level", "DEBUG"], cwd=REPO, stderr=log.open("wb"))
    try:
        _wait_listening(port, proc)
        base = f"http://127.0.0.1:{port}"
        yield RunningHub(url=f"{base}/mcp", base=base, log=log)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _post(hub: RunningHub, token: str | None = None, **extra: Any) -> httpx2.Response:
    headers = dict(HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(extra.pop("headers", {}))
    return httpx2.post(hub.url, headers=headers, content=extra.pop("content", json.dumps(INIT)), timeout=10)


def _nothing_ran(hub: RunningHub) -> None:
    health = httpx2.get(f"{hub.base}/healthz", timeout=5).json()
    assert health["detail"] == {"fx": {"state": "stopped"}}
    assert not list((hub.log.parent / "logs").glob("*.log"))  # the fixture never even started


@pytest.mark.parametrize(
    "make_token",
    [
        pytest.param(lambda k: None, id="no-token"),
        pytest.param(lambda k: "wrong-token", id="wrong-static-token"),
        pytest.param(lambda k: _token(k.good, exp=int(time.time()) - 60), id="expired-jwt"),
        pytest.param(lambda k: _token(k.other), id="wrongly-signed-jwt"),
        pytest.param(lambda k: _token(k.good, aud="https://other.test/mcp"), id="wrong-audience-jwt"),
        pytest.param(lambda k: _token(k.good, iss="https://evil.test"), id="wrong-issuer-jwt"),
    ],
)
def test_requests_without_valid_credentials_get_401_and_run_nothing(
    hub: RunningHub, keys: Keys, make_token: Any
) -> None:
    token = make_token(keys)
    response = _post(hub, token)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer")
    assert "resource_metadata=" in challenge
    _nothing_ran(hub)
    if token:
        assert token not in response.text
        assert token not in hub.log.read_text(errors="replace")


def test_protected_resource_metadata_names_the_issuer(hub: RunningHub) -> None:
    response = httpx2.get(f"{hub.base}/.well-known/oauth-protected-resource/mcp", timeout=5)
    assert response.status_code == 200
    metadata = response.json()
    assert metadata["resource"] == AUDIENCE
    assert metadata["authorization_servers"] == [ISSUER]


def test_foreign_origin_is_rejected(hub: RunningHub) -> None:
    response = _post(hub, STATIC_TOKEN, headers={"Origin": "http://evil.example.com"})
    assert response.status_code == 403
    _nothing_ran(hub)


def test_oversized_body_is_rejected(hub: RunningHub) -> None:
    huge = json.dumps({**INIT, "params": {**INIT["params"], "pad": "x" * 200_000}})
    response = _post(hub, STATIC_TOKEN, content=huge)
    assert response.status_code == 413
    _nothing_ran(hub)


@pytest.mark.parametrize("kind", ["static", "jwt"])
async def test_valid_credentials_reach_the_tools(hub: RunningHub, keys: Keys, kind: str) -> None:
    token = STATIC_TOKEN if kind == "static" else _token(keys.good)
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(hub.url, http_client=http), mode="legacy") as client,
    ):
        result = await client.call_tool("echo", {"text": "through auth"})
    assert result.content[0].text == "through auth"  # type: ignore[union-attr]
    assert token not in hub.log.read_text(errors="replace")


def test_public_bind_without_auth_is_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "hanzo_hub", "serve", "--http", "--host", "0.0.0.0", "--home", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "without authentication" in result.stderr


async def test_sessions_beyond_the_cap_are_refused(make_settings: Any) -> None:
    from tests.conftest import inproc, serve_http_in_process

    settings = make_settings({"alpha": inproc("alpha")}, http={"max_sessions": 2})
    async with serve_http_in_process(settings) as url, httpx2.AsyncClient(timeout=10) as http:
        statuses = []
        for _ in range(3):
            response = await http.post(url, headers=HEADERS, content=json.dumps(INIT))
            statuses.append(response.status_code)
    assert statuses == [200, 200, 503]
