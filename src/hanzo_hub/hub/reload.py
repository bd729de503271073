"""A changed config while the hub serves: servers added, removed or changed take effect without a restart.

:func:`watch` looks at the config file and the catalog's state file (which ``hanzo-hub catalog enable|disable``
writes) every ``backends.watch_config`` seconds. When either changed, the config is loaded again and :func:`apply`
compares the servers it yields (configured ones, enabled catalog servers with their vault secrets) with those being
served: a removed server is stopped and its tools leave the lists, an added one is listed from its snapshot (or
discovered) and starts on first use, and a changed one (command, arguments, environment, URL, headers, filters...)
is stopped and starts again under its new spec. Clients get ``list_changed``. The hub's own servers (memory, llm)
stay as they are, and so do the vault secrets servers get: the hub redacts the secrets it started with, so one set
since waits for a restart (logged).

Only servers and the catalog are reloaded; a change to any other section (HTTP, auth, sandbox, memory, llm...) is
logged as needing a restart. A config that does not load is logged, and the hub keeps serving what it had.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from hanzo_hub.catalog.loader import load_catalog, state_path
from hanzo_hub.config import HubSettings, load_settings
from hanzo_hub.errors import HubError
from hanzo_hub.hub.launch import load_secrets, server_sandboxes
from hanzo_hub.hub.served import configured_servers

if TYPE_CHECKING:
    from hanzo_hub.hub.core import Hub

__all__ = ["ReloadReport", "apply", "watch"]

logger = logging.getLogger(__name__)

RELOADED = frozenset({"servers", "catalog"})
"""The sections a reload applies."""
UNCOMPARED = frozenset({"config_file", "home"})


@dataclass(frozen=True)
class ReloadReport:
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    """Sections that changed but need a restart."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


async def apply(hub: Hub, new: HubSettings) -> ReloadReport:
    """Serve the servers ``new`` describes; returns what changed."""
    old_settings = hub.settings
    catalog = await anyio.to_thread.run_sync(load_catalog, new)
    # The secrets the hub started with: the ones it redacts from everything servers send. A secret set since then
    # would reach a server unredacted, so it waits for a restart.
    secrets = hub.secrets
    if await anyio.to_thread.run_sync(load_secrets, new) != secrets:
        logger.warning("config reload: the vault changed since the hub started; restart the hub to use its secrets")
    configured, entries = configured_servers(new, catalog, secrets)
    own = {name: spec for name, spec in hub.servers.items() if name in hub.own}
    for name in own.keys() & configured.keys():
        logger.warning("config reload: server %r is the hub's own; the configured one is ignored", name)
    servers = {name: spec for name, spec in {**configured, **own}.items() if spec.enabled}
    old = dict(hub.servers)
    report = ReloadReport(
        added=tuple(sorted(servers.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - servers.keys())),
        changed=tuple(sorted(name for name in old.keys() & servers.keys() if old[name] != servers[name])),
        ignored=tuple(
            sorted(
                name
                for name in type(new).model_fields
                if name not in RELOADED | UNCOMPARED and getattr(new, name) != getattr(old_settings, name)
            )
        ),
    )
    if report.ignored:
        logger.warning("config reload: %s changed; restart the hub to apply that", ", ".join(report.ignored))
    hub.settings = old_settings.model_copy(update={"servers": new.servers, "catalog": new.catalog})
    if not report:
        return report
    for name in (*report.removed, *report.changed):
        await hub.pool.remove(name)
    launches = server_sandboxes(hub.settings, servers, entries, hub.sandboxes)
    missing = hub.adopt(servers, entries, catalog, launches)
    for name in (*report.added, *report.changed):
        hub.pool.add(name, servers[name], sandbox=launches.get(name))
    if missing:
        hub.pool.start_discovery(missing, lambda: None)
    await hub.notifier.changed({"tools", "resources", "prompts"})
    logger.info(
        "config reloaded: %d added, %d removed, %d changed (%s)",
        len(report.added),
        len(report.removed),
        len(report.changed),
        ", ".join([*(f"+{n}" for n in report.added), *(f"-{n}" for n in report.removed), *report.changed]),
    )
    return report


def _stamp(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


async def watch(hub: Hub) -> None:
    """Reload whenever the config file or the catalog state changes (runs until cancelled)."""
    interval = hub.settings.backends.watch_config
    config_file, home = hub.settings.config_file, hub.settings.home
    paths = (config_file, state_path(hub.settings))
    seen = [_stamp(path) for path in paths]
    while True:
        await anyio.sleep(interval)
        now = [_stamp(path) for path in paths]
        if now == seen:
            continue
        seen = now
        try:
            new = await anyio.to_thread.run_sync(lambda: load_settings(config_file, home=home))
            await apply(hub, new)
        except HubError as exc:
            logger.error("config reload failed, still serving the previous servers: %s", exc)
        except Exception:  # task boundary: a reload must never take the hub down
            logger.exception("config reload failed, still serving the previous servers")
