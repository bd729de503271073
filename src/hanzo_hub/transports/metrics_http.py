"""``GET /metrics``: the hub's Prometheus metrics (``backends/metrics.py``), in the text exposition format.

Served next to ``/mcp`` inside the same app: with bearer tokens or OAuth configured, a scrape needs a token like any
client (Prometheus sends one with ``authorization: {credentials: ...}``); on a loopback bind without auth it is open
like the rest. ``http.metrics: false`` leaves it out.
"""

from __future__ import annotations

from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["METRICS_PATH", "metrics_routes"]

METRICS_PATH = "/metrics"


class _Exposition:
    """The endpoint (an ASGI app). Collecting reads the hub's state, so it runs on the event loop, not a thread."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if request.method not in ("GET", "HEAD"):
            response = Response("use GET\n", status_code=405, media_type="text/plain")
        else:
            response = Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
        await response(scope, receive, send)


def metrics_routes(registry: CollectorRegistry, *, auth: bool, scopes: list[str] | None = None) -> list[Route]:
    """The route to add to the MCP app; behind the bearer check when ``auth`` is on."""
    app: ASGIApp = _Exposition(registry)
    if auth:
        app = RequireAuthMiddleware(app, scopes or [])
    return [Route(METRICS_PATH, endpoint=app, methods=["GET", "HEAD"])]
