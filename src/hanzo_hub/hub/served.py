"""Which servers a hub serves, and how their names are exposed: the part of the hub's set-up a reloaded config
redoes (``hub/reload.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hanzo_hub.catalog.loader import Catalog, CatalogEntry, catalog_specs, served_entries
from hanzo_hub.config import HubSettings, ServerSpec
from hanzo_hub.hub.launch import secret_env
from hanzo_hub.hub.naming import assign_aliases, prefixed_servers

__all__ = ["configured_servers", "exposure"]


def configured_servers(
    settings: HubSettings, catalog: Catalog, secrets: Mapping[str, str]
) -> tuple[dict[str, ServerSpec], dict[str, CatalogEntry]]:
    """The configured servers and the enabled catalog servers (with their vault secrets in their environment), and
    the catalog entries of the latter. Hand-configured servers win a name clash with catalog entries."""
    served = served_entries(settings, catalog)
    cataloged = {n: s for n, s in catalog_specs(settings, catalog).items() if n not in settings.servers}
    entries = {name: served[name] for name in cataloged}
    cataloged = {n: secret_env(entries[n], s, secrets) for n, s in cataloged.items()}
    return {**cataloged, **settings.servers}, entries


def exposure(settings: HubSettings, servers: Mapping[str, ServerSpec], own: Iterable[str]) -> dict[str, Any]:
    """The registry's arguments for ``servers``: aliases, prefixing (``own``: the hub's own servers), per-tool
    overrides and tool filters."""
    return {
        "aliases": assign_aliases(servers, {name: spec.alias for name, spec in servers.items()}),
        "prefix": prefixed_servers(settings.exposure.prefix, servers, own=own),
        "overrides": {name: spec.tool_overrides for name, spec in servers.items()},
        "filters": {name: spec.tools for name, spec in servers.items()},
    }
