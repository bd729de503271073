"""The HTTP application: ``/mcp``, ``/v1/chat/completions``, ``/metrics`` and ``/healthz`` under one lifespan that
runs the hub, and its server loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.heap import freeze_startup_heap
from hanzo_hub.hub.server import build_server
from hanzo_hub.hub.status import health
from hanzo_hub.transports.http import check_bind, mcp_app
from hanzo_hub.transports.metrics_http import metrics_routes
from hanzo_hub.transports.openai_http import openai_routes

logger = logging.getLogger(__name__)


def build_app(settings: HubSettings) -> Starlette:
    """A Starlette app serving the hub; entering its lifespan starts the hub, leaving it stops every server."""
    check_bind(settings.http, settings.auth)
    hub = Hub(settings)
    server = build_server(hub)
    scopes = list(settings.auth.oauth.required_scopes) if settings.auth.oauth else []
    extra = openai_routes(hub.llm, settings.user, auth=settings.auth.enabled, scopes=scopes)
    if settings.http.metrics:
        extra += metrics_routes(hub.metrics.registry, auth=settings.auth.enabled, scopes=scopes)
    inner = mcp_app(server, settings.http, settings.auth, routes=extra)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with hub.run(), server.session_manager.run():
            freeze_startup_heap()
            yield {"hub": hub}

    async def healthz(request: Request) -> JSONResponse:
        report = health(hub)
        report["detail"] = {name: {"state": s["state"]} for name, s in report["detail"].items()}
        return JSONResponse(report)

    return Starlette(routes=[Route("/healthz", healthz), Mount("/", app=inner)], lifespan=lifespan)


async def serve_http(settings: HubSettings) -> None:
    """Serve until SIGINT/SIGTERM; uvicorn's graceful shutdown runs the lifespan exit, which stops every server."""
    config = uvicorn.Config(
        build_app(settings),
        host=settings.http.host,
        port=settings.http.port,
        log_level=settings.log_level.lower(),
        lifespan="on",
        access_log=False,
        log_config=None,
        timeout_graceful_shutdown=int(settings.backends.shutdown_timeout) + 1,
    )
    await uvicorn.Server(config).serve()
