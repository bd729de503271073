"""Install on first use: a catalog server's missing environment is built before its first start.

The client call that starts the server hears how the install goes, as progress notifications of that call (when it
asked for progress); the log always does.
"""

from __future__ import annotations

import contextlib
import logging

import anyio
from mcp.shared.dispatcher import ProgressFnT

from hanzo_hub.catalog.envs import InstallEvent, install
from hanzo_hub.catalog.loader import CatalogEntry
from hanzo_hub.config import HubSettings
from hanzo_hub.errors import BackendUnavailable, InstallFailed

logger = logging.getLogger(__name__)

PROGRESS_BUFFER = 64
"""Install events held for a slow client; more are dropped (the log has them all)."""


async def install_before_start(settings: HubSettings, entry: CatalogEntry, report: ProgressFnT | None) -> None:
    """Build ``entry``'s environment, reporting each step to ``report`` (the starting call's progress callback).

    Raises:
        BackendUnavailable: the install failed (its reason names the failing step); the next start retries it.
    """
    server = entry.id
    send, receive = anyio.create_memory_object_stream[InstallEvent](PROGRESS_BUFFER)

    def progress(event: InstallEvent) -> None:
        logger.info("installing catalog server %s: %s (%d/%d)", server, event.message, event.step, event.total)
        if report is not None:
            with contextlib.suppress(anyio.WouldBlock):  # a client too slow to take progress misses some
                send.send_nowait(event)

    async def forward() -> None:
        assert report is not None
        async with receive:
            async for event in receive:
                with contextlib.suppress(Exception):  # progress is best effort; the install goes on
                    await report(float(event.step), float(event.total), f"installing {server}: {event.message}")

    logger.info("catalog server %s is not installed; installing it before its first start", server)
    failure: InstallFailed | None = None
    try:
        async with anyio.create_task_group() as tg:
            if report is not None:
                tg.start_soon(forward)
            try:
                await install(settings, entry, progress=progress)
            except InstallFailed as exc:  # caught inside, so it does not come out wrapped in an exception group
                failure = exc
            finally:
                send.close()
    finally:
        receive.close()
    if failure is not None:
        raise BackendUnavailable(server, f"is not installed, and installing it failed: {failure.reason}")
