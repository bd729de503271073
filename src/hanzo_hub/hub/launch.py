"""Which stdio servers run in a sandbox, with what limits and grants, and which vault secrets they receive.

A stdio server is sandboxed when it has a sandbox policy: a catalog manifest (``_meta...sandbox``: network and fs
grants; the backend the manifest's ``sandbox.backend`` names, else the hub's ``sandbox.backend``, bubblewrap by
default) or a ``sandbox.servers[name]`` entry in config that names
a ``sandbox`` backend or sets ``limits``/``read``/``write``. Servers the user configured without any of that launch
as before (unconfined). ``sandbox: "none"`` is the explicit opt-out (rlimits and a cgroup only).

Grants: the manifest's ``fs.read``/``fs.write`` templates (``{project}``, ``{home}``...) plus config ``read``/``write``;
the server's ``cwd``; its catalog environment (read-only); for servers run by the hub's own interpreter, the
directories its packages are imported from (read-only; an editable install lives outside the interpreter prefix).
Writable directories are created at launch; readable ones missing then are skipped (an environment built on first
start exists only by then). Manifest network ``loopback`` shares
the host network (a sandbox cannot reach host loopback services otherwise; per-call URL checks still apply).

Secrets: ``${vault:NAME}`` in a server's env or headers, plus, for catalog servers, every environment variable the
manifest marks ``isSecret`` whose name the vault holds. Values are filled in by the connector at launch.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Mapping
from pathlib import Path

from hanzo_hub.catalog.loader import CatalogEntry, env_dir, fill, placeholders
from hanzo_hub.config import HubSettings, ServerSpec, StdioServerSpec
from hanzo_hub.errors import VaultError
from hanzo_hub.sandbox.base import HOST_PYTHON_PREFIXES, Grants, Limits, Network
from hanzo_hub.sandbox.launch import Backends, ServerSandbox
from hanzo_hub.sandbox.vault import Vault

__all__ = ["load_secrets", "secret_env", "server_sandboxes"]

logger = logging.getLogger(__name__)

PACKAGES = ("hanzo_hub", "servers", "mcp")


def load_secrets(settings: HubSettings) -> dict[str, str]:
    """Every vault value, or nothing when no vault exists yet (no key file is created just to find that out)."""
    if not (settings.vault_dir / "secrets.json").is_file():
        return {}
    try:
        return Vault(settings.vault_dir, keyring_service=settings.sandbox.keyring_service).values()
    except VaultError as exc:
        logger.error("secrets vault unusable, servers get no secrets: %s", exc)
        return {}


def secret_env(entry: CatalogEntry, spec: ServerSpec, secrets: Mapping[str, str]) -> ServerSpec:
    """``spec`` with a ``${vault:NAME}`` reference for each secret env var of the manifest the vault holds."""
    if not isinstance(spec, StdioServerSpec):
        return spec
    wanted = {
        var.name
        for package in entry.server.packages
        for var in package.environment_variables
        if var.is_secret and var.name in secrets and var.name not in spec.env
    }
    if not wanted:
        return spec
    return spec.model_copy(update={"env": {**spec.env, **{name: f"${{vault:{name}}}" for name in sorted(wanted)}}})


def _outside_prefixes(path: Path) -> bool:
    text = str(path)
    return not text.startswith("/usr/") and not any(text.startswith(p) for p in HOST_PYTHON_PREFIXES)


def _interpreter_dirs() -> list[Path]:
    """Where the hub's interpreter imports our packages from, when that is outside its prefix (editable installs)."""
    found: list[Path] = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec is not None else []:
            parent = Path(location).resolve().parent
            if _outside_prefixes(parent) and parent not in found:
                found.append(parent)
    return found


def _grants(
    settings: HubSettings, name: str, spec: StdioServerSpec, entry: CatalogEntry | None
) -> tuple[Grants, Network | None]:
    policy = settings.sandbox.servers.get(name)
    read: list[Path] = list(policy.read) if policy is not None else []
    write: list[Path] = list(policy.write) if policy is not None else []
    network: Network | None = None
    if entry is not None:
        values = placeholders(settings, entry.meta)
        read += [Path(fill(t, values)) for t in entry.meta.sandbox.fs.read]
        write += [Path(fill(t, values)) for t in entry.meta.sandbox.fs.write]
        read.append(env_dir(settings, entry.id))
        declared = entry.meta.sandbox.network
        network = "full" if declared == "loopback" else declared
    if spec.cwd is not None:
        read.append(spec.cwd)
    if spec.command == sys.executable or Path(spec.command).resolve() == Path(sys.executable).resolve():
        read += _interpreter_dirs()
    writable: list[Path] = []
    for path in write:
        real = path.expanduser().resolve()
        if real not in writable:
            writable.append(real)
    readable: list[Path] = []
    for path in read:
        real = path.expanduser().resolve()
        if real not in readable and real not in writable:  # missing ones are dropped at launch
            readable.append(real)
    return Grants(writable=tuple(writable), readable=tuple(readable)), network


def server_sandboxes(
    settings: HubSettings, servers: Mapping[str, ServerSpec], catalog: Mapping[str, CatalogEntry], backends: Backends
) -> dict[str, ServerSandbox]:
    """A ``ServerSandbox`` for every stdio server with a sandbox policy (see the module docstring)."""
    out: dict[str, ServerSandbox] = {}
    for name, spec in servers.items():
        if not isinstance(spec, StdioServerSpec):
            continue
        policy = settings.sandbox.servers.get(name)
        entry = catalog.get(name)
        configured = policy is not None and bool(
            policy.sandbox is not None or policy.limits is not None or policy.read or policy.write
        )
        if entry is None and not configured:
            continue
        declared = entry.meta.sandbox.backend if entry is not None else None
        kind = (policy.sandbox if policy is not None else None) or declared or settings.sandbox.backend
        limits = Limits.from_settings(
            policy.limits if policy is not None and policy.limits else settings.sandbox.limits
        )
        grants, network = _grants(settings, name, spec, entry)
        if network is not None and not (policy is not None and policy.limits is not None):
            limits = limits.with_(network=network)
        out[name] = ServerSandbox(kind=kind, limits=limits, grants=grants, backends=backends)
    return out
