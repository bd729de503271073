"""The only manifest reader: ``<dir>/<id>/server.json`` + ``tools.json`` → catalog entries → hub server specs.

Manifests ship inside the package (``hanzo_hub/catalog/manifests/<id>/``, package data, so an installed wheel has
them); users add more with ``hanzo-hub catalog add`` (``<home>/catalog/manifests``) or ``catalog.manifest_dirs``.
Later folders win. A broken manifest becomes a :class:`ManifestInvalid` naming the file and the key and is skipped;
the rest loads. ``refresh`` writes live ``tools.json`` files under ``<home>/catalog/tools/<id>/``, which take
precedence over the packaged ones.

The hub includes the catalog with :func:`catalog_specs` (servers) and :func:`catalog_snapshots` (their tool lists,
so ``tools/list`` answers before anything is installed).
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from hanzo_hub.catalog.models import META_KEY, CatalogMeta, ServerJson, ToolsSnapshot
from hanzo_hub.config import (
    CatalogOverrideSpec,
    HubSettings,
    ServerSpec,
    StdioServerSpec,
    ToolOverrideSpec,
    environment,
)
from hanzo_hub.errors import ManifestInvalid
from hanzo_hub.templates import protect_vault_refs

logger = logging.getLogger(__name__)

PACKAGED_DIR = Path(__file__).resolve().parent / "manifests"
"""The manifests shipped with hanzo-hub (package data)."""


@dataclass(frozen=True)
class CatalogEntry:
    """One loaded manifest."""

    id: str
    directory: Path
    server: ServerJson
    meta: CatalogMeta
    tools: ToolsSnapshot | None
    tools_origin: Literal["packaged", "home", "none"] = "packaged"


@dataclass
class Catalog:
    """Every manifest that loaded, and the errors of those that did not."""

    entries: dict[str, CatalogEntry] = field(default_factory=dict)
    errors: list[ManifestInvalid] = field(default_factory=list)


@dataclass
class CatalogState:
    """What the CLI recorded: servers enabled or disabled by hand, and live-verified tool hashes."""

    enabled: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    verified: dict[str, str] = field(default_factory=dict)


def _key(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestInvalid(str(path), "(file)", "missing") from None
    except OSError as exc:
        raise ManifestInvalid(str(path), "(file)", f"cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ManifestInvalid(str(path), f"line {exc.lineno} column {exc.colno}", f"not JSON: {exc.msg}") from None


def read_server_json(path: Path) -> tuple[ServerJson, CatalogMeta]:
    """Parse and validate one ``server.json``.

    Raises:
        ManifestInvalid: naming ``path`` and the first offending key.
    """
    data = _read_json(path)
    try:
        server = ServerJson.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ManifestInvalid(str(path), _key(err["loc"]), err["msg"]) from None
    try:
        meta = CatalogMeta.model_validate(server.meta[META_KEY])
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ManifestInvalid(str(path), _key(("_meta", META_KEY, *err["loc"])), err["msg"]) from None
    return server, meta


def read_tools_json(path: Path) -> ToolsSnapshot:
    """Parse and check one ``tools.json`` (its hash must match its tools).

    Raises:
        ManifestInvalid: naming ``path`` and the offending key.
    """
    data = _read_json(path)
    try:
        return ToolsSnapshot.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ManifestInvalid(str(path), _key(err["loc"]), err["msg"]) from None


def home_tools_path(settings: HubSettings, server_id: str) -> Path:
    """Where ``refresh`` keeps the live ``tools.json`` of a server."""
    return settings.catalog_dir / "tools" / server_id / "tools.json"


def user_manifest_dir(settings: HubSettings) -> Path:
    """Where ``hanzo-hub catalog add`` writes manifests."""
    return settings.catalog_dir / "manifests"


def manifest_dirs(settings: HubSettings) -> list[Path]:
    """Folders searched for manifests, lowest precedence first."""
    dirs = [PACKAGED_DIR] if settings.catalog.packaged else []
    return [*dirs, *settings.catalog.manifest_dirs, user_manifest_dir(settings)]


def load_entry(directory: Path, home_tools: Path | None = None) -> CatalogEntry:
    """Load ``directory/server.json`` and its tools (``home_tools`` wins over the manifest's own file).

    Raises:
        ManifestInvalid: the manifest or its tools file is broken.
    """
    server, meta = read_server_json(directory / "server.json")
    if meta.id != directory.name:
        raise ManifestInvalid(
            str(directory / "server.json"), f"_meta.{META_KEY}.id", f"must equal the folder name {directory.name!r}"
        )
    tools: ToolsSnapshot | None = None
    origin: Literal["packaged", "home", "none"] = "none"
    if home_tools is not None and home_tools.is_file():
        tools, origin = read_tools_json(home_tools), "home"
    elif (directory / meta.tools_file).is_file():
        tools, origin = read_tools_json(directory / meta.tools_file), "packaged"
    return CatalogEntry(meta.id, directory, server, meta, tools, origin)


def load_catalog(settings: HubSettings) -> Catalog:
    """Every manifest in :func:`manifest_dirs`; broken ones are logged, recorded in ``errors`` and skipped."""
    catalog = Catalog()
    for root in manifest_dirs(settings):
        if not root.is_dir():
            continue
        for directory in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            try:
                entry = load_entry(directory, home_tools_path(settings, directory.name))
            except ManifestInvalid as exc:
                logger.warning("skipping manifest: %s", exc)
                catalog.errors.append(exc)
                continue
            catalog.entries[entry.id] = entry
    return catalog


# --- state ------------------------------------------------------------------------------------------------------


def state_path(settings: HubSettings) -> Path:
    """The CLI's record of enabled/disabled servers and verified hashes."""
    return settings.catalog_dir / "state.json"


def read_state(settings: HubSettings) -> CatalogState:
    """The recorded state; an unreadable file counts as empty (and is logged)."""
    path = state_path(settings)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return CatalogState(
            enabled=list(data.get("enabled", [])),
            disabled=list(data.get("disabled", [])),
            verified=dict(data.get("verified", {})),
        )
    except FileNotFoundError:
        return CatalogState()
    except (OSError, ValueError, AttributeError, TypeError):
        logger.warning("ignoring unreadable catalog state %s", path)
        return CatalogState()


def write_state(settings: HubSettings, state: CatalogState) -> None:
    """Store the state atomically."""
    path = state_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    body = {"enabled": sorted(set(state.enabled)), "disabled": sorted(set(state.disabled)), "verified": state.verified}
    tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def enabled_ids(settings: HubSettings, catalog: Catalog) -> list[str]:
    """Catalog ids the hub serves: ``catalog.enabled`` plus ``catalog enable``, minus ``catalog disable``."""
    state = read_state(settings)
    wanted = (set(settings.catalog.enabled) | set(state.enabled)) - set(state.disabled)
    return sorted(i for i in wanted if i in catalog.entries)


# --- specs --------------------------------------------------------------------------------------------------------


def env_dir(settings: HubSettings, server_id: str) -> Path:
    """The environment (venv or npm prefix) of a cataloged server."""
    return settings.envs_dir / server_id


def placeholders(settings: HubSettings, meta: CatalogMeta) -> dict[str, str]:
    """Values of the launch-template placeholders for one server."""
    env = env_dir(settings, meta.id)
    bins = {"venv": env / "bin", "npm": env / "node_modules" / ".bin", "none": env}[meta.install.kind]
    site = env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    project = settings.catalog.project or Path.cwd()
    return {
        "env": str(env),
        "bin": str(bins),
        "home": str(settings.home),
        "project": str(project),
        "site": str(site),
        "python": sys.executable,
    }


def fill(template: str, values: dict[str, str]) -> str:
    """Fill one template (placeholders were checked when the manifest loaded); ``${vault:NAME}`` stays as written."""
    return protect_vault_refs(template).format_map(values)


def entry_spec(
    settings: HubSettings, entry: CatalogEntry, instance: CatalogOverrideSpec | None = None
) -> StdioServerSpec:
    """The stdio spec that launches ``entry`` from its environment, telemetry switched off.

    The manifest's ``launch.makeDirs`` (data folders such as the memory server's) are created here, and its
    ``toolOverrides`` travel with the spec (the hub's registry hides, renames and re-describes those tools). The
    manifest's ``sandbox.envPassthrough`` variables set in the hub's environment are passed on (over the manifest's
    defaults). The user's ``catalog.overrides[id]`` applies on top: ``args`` replaces the manifest's launch arguments,
    ``extra_args`` is appended, ``env`` is merged over the rest; the telemetry switches always stay. An
    ``instance`` (one of ``catalog.instances``) takes the override's place.
    """
    values = placeholders(settings, entry.meta)
    launch, telemetry = entry.meta.launch, entry.meta.telemetry
    override = instance if instance is not None else settings.catalog.overrides.get(entry.id)
    for folder in launch.make_dirs:
        Path(fill(folder, values)).mkdir(parents=True, exist_ok=True)
    args = [*launch.args] if override is None or override.args is None else [*override.args]
    env = {k: fill(v, values) for k, v in launch.env.items()}
    if entry.meta.sandbox.env_passthrough:
        host = environment()
        env.update({name: host[name] for name in entry.meta.sandbox.env_passthrough if name in host})
    if override is not None:
        args += override.extra_args
        env.update({k: fill(v, values) for k, v in override.env.items()})
    env.update(telemetry.env)
    return StdioServerSpec(
        command=fill(launch.command, values),
        args=tuple(fill(a, values) for a in [*args, *telemetry.args]),
        env=env,
        cwd=Path(fill(launch.cwd, values)) if launch.cwd else None,
        call_timeout=launch.call_timeout_seconds,
        protocol=launch.protocol,
        error_patterns=tuple(entry.meta.error_patterns),
        tool_overrides={
            name: ToolOverrideSpec(hidden=fix.hidden, rename=fix.rename, description=fix.description)
            for name, fix in entry.meta.tool_overrides.items()
        },
        tools=override.tools if override is not None else None,
    )


def served_entries(settings: HubSettings, catalog: Catalog) -> dict[str, CatalogEntry]:
    """The catalog servers the hub serves, by server name, with their entries: each enabled entry under its id, and
    each of ``catalog.instances`` under its own name (an instance named like an enabled entry takes its place). An
    instance of an entry the catalog lacks is logged and left out."""
    served = {i: catalog.entries[i] for i in enabled_ids(settings, catalog)}
    for name, instance in settings.catalog.instances.items():
        entry = catalog.entries.get(instance.entry)
        if entry is None:
            logger.warning("catalog instance %s: no catalog entry %r; it is not served", name, instance.entry)
            continue
        served[name] = entry
    return served


def catalog_specs(settings: HubSettings, catalog: Catalog | None = None) -> dict[str, ServerSpec]:
    """Server specs of the served catalog servers (:func:`served_entries`), by server name, for the hub to merge
    into its servers.

    Servers the user configured by hand should win over these on a name clash (merge as ``{**catalog, **user}``).
    """
    catalog = catalog or load_catalog(settings)
    instances = settings.catalog.instances
    return {name: entry_spec(settings, e, instances.get(name)) for name, e in served_entries(settings, catalog).items()}


def listing_json(entry: CatalogEntry) -> dict[str, Any] | None:
    """The entry's tools in the shape of ``backends.listing.Listing.to_json`` (``None`` without a tools file)."""
    if entry.tools is None:
        return None
    return {
        "tools": entry.tools.tools,
        "resources": [],
        "resourceTemplates": [],
        "prompts": [],
        "serverInfo": entry.tools.server_info,
        "instructions": None,
        "capabilities": entry.tools.capabilities,
    }


def catalog_snapshots(settings: HubSettings, catalog: Catalog | None = None) -> dict[str, dict[str, Any]]:
    """Listing-shaped tool lists of the enabled entries, to seed the hub's snapshots before any install.

    The hub stores each one whose server has no snapshot yet:
    ``store.save(name, Listing.from_json(data))`` — the first live listing then replaces it.
    """
    catalog = catalog or load_catalog(settings)
    out: dict[str, dict[str, Any]] = {}
    for name, entry in served_entries(settings, catalog).items():
        data = listing_json(entry)
        if data is not None:
            out[name] = data
    return out
