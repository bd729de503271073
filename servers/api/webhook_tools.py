"""Webhook tools: sign and verify HMAC signatures in the common schemes, and a capture receiver on loopback that
records the webhooks a service sends (to inspect them or verify their signatures)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import itertools
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any, Literal

import anyio
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result
from servers.api.auth_tools import Secret, SecretEnv, secret
from servers.api.net import body_fields

LOCAL = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
SERVE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
STOP = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
MAX_RECEIVERS = 8
MAX_CAPTURED_BODY = 1_000_000

Scheme = Literal["hex", "github", "stripe", "slack", "standard"]
Digest = Literal["sha256", "sha1", "sha512"]
SCHEME_DOC = (
    "Schemes: 'hex' (hex HMAC of the body in X-Signature), 'github' (X-Hub-Signature-256: sha256=<hex>), 'stripe' "
    "(Stripe-Signature: t=<ts>,v1=<hex of ts.body>), 'slack' (X-Slack-Signature: v0=<hex of v0:ts:body>), "
    "'standard' (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature: v1,<base64 of id.ts.body>; a "
    "whsec_ secret is base64-decoded)."
)


def _mac(key: bytes, message: bytes, digest: str) -> bytes:
    return hmac.new(key, message, getattr(hashlib, digest)).digest()


def sign(body: bytes, key: str, scheme: str, digest: str, timestamp: int, msg_id: str) -> dict[str, str]:
    """The headers a sender adds for ``body`` under ``scheme``."""
    raw = key.encode()
    if scheme == "hex":
        return {"X-Signature": _mac(raw, body, digest).hex()}
    if scheme == "github":
        return {"X-Hub-Signature-256" if digest == "sha256" else "X-Hub-Signature": f"{digest}=" +
                _mac(raw, body, digest).hex()}  # fmt: skip
    if scheme == "stripe":
        return {"Stripe-Signature": f"t={timestamp},v1=" + _mac(raw, f"{timestamp}.".encode() + body, digest).hex()}
    if scheme == "slack":
        hex_mac = _mac(raw, f"v0:{timestamp}:".encode() + body, digest).hex()
        return {"X-Slack-Signature": f"v0={hex_mac}", "X-Slack-Request-Timestamp": str(timestamp)}
    try:
        secret_bytes = base64.b64decode(key.removeprefix("whsec_"), validate=True) if key.startswith("whsec_") else raw
    except binascii.Error as exc:
        raise ToolError("a whsec_ secret must be base64 after the prefix") from exc
    std_mac = _mac(secret_bytes, f"{msg_id}.{timestamp}.".encode() + body, digest)
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": "v1," + base64.b64encode(std_mac).decode()}  # fmt: skip


def _int(value: str) -> int:
    try:
        return int(value or 0)
    except ValueError as exc:
        raise ToolError(f"the signature timestamp {value!r} is not a unix time") from exc


def verify(
    body: bytes, headers: dict[str, str], key: str, scheme: str, digest: str, tolerance: int
) -> tuple[bool, str]:
    """Whether ``headers`` carry a valid signature of ``body``; the reason when not."""
    h = {k.lower(): v for k, v in headers.items()}
    timestamp, msg_id, given = 0, "", []
    if scheme == "hex":
        given = [h.get("x-signature", "")]
    elif scheme == "github":
        given = [h.get("x-hub-signature-256" if digest == "sha256" else "x-hub-signature", "")]
    elif scheme == "stripe":
        parts = [p.split("=", 1) for p in h.get("stripe-signature", "").split(",") if "=" in p]
        timestamp = _int(next((v for k, v in parts if k == "t"), "0"))
        given = [f"t={timestamp},v1={v}" for k, v in parts if k == "v1"]
    elif scheme == "slack":
        timestamp = _int(h.get("x-slack-request-timestamp", "0"))
        given = [h.get("x-slack-signature", "")]
    else:
        timestamp, msg_id = _int(h.get("webhook-timestamp", "0")), h.get("webhook-id", "")
        given = h.get("webhook-signature", "").split()
    if not any(given):
        return False, f"no {scheme} signature header among {sorted(h)}"
    if scheme in ("stripe", "slack", "standard") and tolerance and abs(time.time() - timestamp) > tolerance:
        return False, f"timestamp {timestamp} is outside the {tolerance}s tolerance (replay?)"
    expected = next(iter(sign(body, key, scheme, digest, timestamp, msg_id).items()))[1]
    if scheme == "standard":
        expected = sign(body, key, scheme, digest, timestamp, msg_id)["webhook-signature"]
    if any(hmac.compare_digest(expected.encode(), g.encode()) for g in given):
        return True, "signature matches"
    return False, "signature does not match (wrong secret, or the body was changed)"


class Receiver:
    """A loopback HTTP server in a thread that records every request and answers a fixed response."""

    def __init__(self, port: int, status: int, reply: str, limit: int) -> None:
        self.captured: deque[dict[str, Any]] = deque(maxlen=limit)
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _capture(self) -> None:
                length = min(int(self.headers.get("content-length") or 0), MAX_CAPTURED_BODY)
                body = self.rfile.read(length) if length else b""
                with receiver.lock:
                    receiver.captured.append({"method": self.command, "path": self.path,
                                              "headers": dict(self.headers.items()), "body": body,
                                              "receivedAt": time.time(), "client": self.client_address[0]})  # fmt: skip
                payload = reply.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = do_PUT = do_PATCH = do_GET = do_DELETE = _capture

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="webhook-receiver", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


_receivers: dict[str, Receiver] = {}
_ids = itertools.count(1)


def _receiver(receiver_id: str) -> Receiver:
    found = _receivers.get(receiver_id)
    if found is None:
        raise ToolError(f"no webhook receiver {receiver_id!r}; running: {sorted(_receivers)} (start one with "
                        "webhook_listen)")  # fmt: skip
    return found


def _body_bytes(body: str, receiver_id: str | None, index: int) -> tuple[bytes, dict[str, str]]:
    if receiver_id is None:
        return body.encode(), {}
    captured = list(_receiver(receiver_id).captured)
    if not -len(captured) <= index < len(captured):
        raise ToolError(f"receiver {receiver_id} holds {len(captured)} requests; index {index} is out of range")
    request = captured[index]
    return request["body"], request["headers"]


def register(mcp: MCPServer) -> None:
    """Add the webhook tools to ``mcp``."""

    @mcp.tool(
        annotations=LOCAL,
        description="Sign a webhook body with HMAC and return the headers a sender attaches. " + SCHEME_DOC +
        " Use to send a correctly signed test webhook (then POST it with http_post).",
    )  # fmt: skip
    async def webhook_sign(
        body: Annotated[str, Field(description="the exact request body")],
        secret_value: Secret = "",
        secret_env: SecretEnv = None,
        scheme: Scheme = "github",
        digest: Digest = "sha256",
        timestamp: Annotated[int | None, Field(ge=0, description="unix time; default now")] = None,
        message_id: Annotated[str, Field(description="webhook-id (standard scheme)")] = "msg_1",
    ) -> CallToolResult:
        key = secret(secret_value, secret_env, "webhook secret") or ""
        headers = sign(body.encode(), key, scheme, digest, timestamp or int(time.time()), message_id)
        return json_result({"headers": headers, "scheme": scheme})

    @mcp.tool(
        annotations=LOCAL,
        description="Verify a webhook's HMAC signature in constant time, from a body + headers or from a request "
        "captured by webhook_listen (receiver_id + index). Timestamped schemes are checked against tolerance "
        "seconds (replay protection). " + SCHEME_DOC + " Returns valid and the reason.",
    )  # fmt: skip
    async def webhook_verify(
        body: Annotated[str, Field(description="the exact request body (unless receiver_id is given)")] = "",
        headers: Annotated[dict[str, str] | None, Field(description="the request headers")] = None,
        receiver_id: Annotated[str | None, Field(description="verify a captured request instead")] = None,
        index: Annotated[int, Field(description="which captured request; -1 = latest")] = -1,
        secret_value: Secret = "",
        secret_env: SecretEnv = None,
        scheme: Scheme = "github",
        digest: Digest = "sha256",
        tolerance: Annotated[int, Field(ge=0, le=86_400, description="max age in seconds; 0 = no check")] = 300,
    ) -> CallToolResult:
        key = secret(secret_value, secret_env, "webhook secret") or ""
        raw, captured_headers = _body_bytes(body, receiver_id, index)
        valid, reason = verify(raw, headers or captured_headers, key, scheme, digest, tolerance)
        return json_result({"valid": valid, "reason": reason})

    @mcp.tool(
        annotations=SERVE,
        description="Start a webhook capture receiver on loopback (127.0.0.1) that records every request sent to "
        "it and answers with a fixed status and body. Returns its id and URL: register the URL as a webhook "
        "target, then read the deliveries with webhook_requests.",
    )
    async def webhook_listen(
        port: Annotated[int, Field(ge=0, le=65535, description="0 = any free port")] = 0,
        response_status: Annotated[int, Field(ge=200, le=599)] = 200,
        response_body: str = "ok",
        max_requests: Annotated[int, Field(ge=1, le=10_000, description="oldest dropped beyond")] = 1000,
    ) -> CallToolResult:
        if len(_receivers) >= MAX_RECEIVERS:
            raise ToolError(f"{MAX_RECEIVERS} receivers are running; stop one with webhook_stop")
        try:
            receiver = Receiver(port, response_status, response_body, max_requests)
        except OSError as exc:
            raise ToolError(f"cannot listen on 127.0.0.1:{port}: {exc}") from exc
        receiver_id = f"wh{next(_ids)}"
        _receivers[receiver_id] = receiver
        return json_result({"receiverId": receiver_id, "url": receiver.url})

    @mcp.tool(
        annotations=LOCAL,
        description="List the requests a webhook receiver captured (method, path, headers, body), waiting up to "
        "wait_seconds until at least min_count have arrived. clear=true empties the list after reading.",
    )
    async def webhook_requests(
        receiver_id: Annotated[str, Field(min_length=1)],
        min_count: Annotated[int, Field(ge=0, le=10_000)] = 0,
        wait_seconds: Annotated[float, Field(ge=0, le=120)] = 0,
        clear: bool = False,
    ) -> CallToolResult:
        receiver = _receiver(receiver_id)
        with anyio.move_on_after(wait_seconds):
            while len(receiver.captured) < min_count:  # noqa: ASYNC110 - deliveries arrive on the receiver's thread
                await anyio.sleep(0.05)
        with receiver.lock:
            captured = list(receiver.captured)
            if clear:
                receiver.captured.clear()
        requests = [
            {**{k: v for k, v in r.items() if k != "body"},
             **body_fields(r["body"], r["headers"].get("Content-Type", ""), False)}
            for r in captured
        ]  # fmt: skip
        return json_result({"receiverId": receiver_id, "count": len(requests), "requests": requests,
                            "waitedFor": min_count, "complete": len(requests) >= min_count})  # fmt: skip

    @mcp.tool(
        annotations=STOP,
        description="Stop a webhook capture receiver and drop what it captured. Returns how many requests it held.",
    )
    async def webhook_stop(receiver_id: Annotated[str, Field(min_length=1)]) -> CallToolResult:
        receiver = _receiver(receiver_id)
        held = len(receiver.captured)
        await anyio.to_thread.run_sync(receiver.stop)
        del _receivers[receiver_id]
        return json_result({"receiverId": receiver_id, "stopped": True, "captured": held})
