"""The per-server checks of ``hanzo-hub doctor``: will each enabled downstream start, and (``--probe``) does it.

Without ``--probe`` nothing is started: a stdio server's command must resolve the way the sandbox launch resolves
it, a catalog server must be installed (or install on first start) with the binaries its manifest requires, every
``${vault:NAME}`` it references must be in the vault, and an in-process target must import. With ``--probe`` the
hub runs for a moment and lists each server live, through the same supervisor, sandbox and secrets as serving does.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import time

import anyio

from hanzo_hub.backends.listing import Listing, fetch_listing
from hanzo_hub.backends.oauth import OAuthStore
from hanzo_hub.backends.snapshot import file_key
from hanzo_hub.catalog.envs import is_installed
from hanzo_hub.catalog.loader import CatalogEntry
from hanzo_hub.config import (
    HttpServerSpec,
    HubSettings,
    InprocServerSpec,
    ServerSpec,
    SseServerSpec,
    StdioServerSpec,
    environment,
)
from hanzo_hub.doctor.report import Check, Status
from hanzo_hub.errors import VaultError
from hanzo_hub.hub.core import Hub
from hanzo_hub.sandbox.vault import SECRET_REF

__all__ = ["check_servers", "probe_servers"]

IN_USE = "in use by another process"
"""What a store locked by another process says (the memory store of a hub serving the same home)."""


def _secret_refs(spec: ServerSpec) -> set[str]:
    if isinstance(spec, StdioServerSpec):
        values = list(spec.env.values())
    elif isinstance(spec, InprocServerSpec):
        values = []
    else:
        values = [v.get_secret_value() for v in spec.headers.values()]
    return {m.group(1) for value in values for m in SECRET_REF.finditer(value)}


def _command_found(spec: StdioServerSpec) -> bool:
    command = spec.command
    if "/" in command:
        path = command if os.path.isabs(command) or spec.cwd is None else os.path.join(spec.cwd, command)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    return shutil.which(command, path=spec.env.get("PATH", environment().get("PATH"))) is not None


def _stdio_problems(
    settings: HubSettings, name: str, spec: StdioServerSpec, entry: CatalogEntry | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(failures, warnings), each a (what, hint) pair."""
    fails: list[tuple[str, str]] = []
    warns: list[tuple[str, str]] = []
    if entry is not None and not is_installed(settings, entry):
        how = f"hanzo-hub catalog install {name}"
        if entry.meta.install.kind == "npm" and shutil.which("npm") is None:
            fails.append(("not installed, and npm (which installs it) is not on PATH", "install Node.js and npm"))
        elif settings.catalog.install_on_start:
            warns.append((f"not installed yet ({entry.meta.install.kind}); installs on first start", f"{how} now"))
        else:
            fails.append(("not installed (catalog.install_on_start is off)", how))
    elif not _command_found(spec):
        fails.append((f"command {spec.command!r} not found", "install it, or fix the server's command or PATH"))
    if entry is not None:
        missing = [b for b in entry.meta.requires.binaries if shutil.which(b) is None]
        if missing:
            fails.append((f"needs {', '.join(missing)} on PATH", f"install {', '.join(missing)}"))
        unset = sorted(
            var.name
            for package in entry.server.packages
            for var in package.environment_variables
            if var.is_required and var.name not in spec.env and var.default is None and var.value is None
        )
        if unset:
            hint = (
                f"hanzo-hub secrets set {unset[0]}" if secret_named(entry, unset[0]) else "set it in catalog.overrides"
            )
            warns.append((f"{', '.join(unset)} not set (the manifest requires it)", hint))
    if spec.cwd is not None and not spec.cwd.is_dir():
        fails.append((f"cwd {spec.cwd} is not a folder", "fix the server's cwd"))
    return fails, warns


def secret_named(entry: CatalogEntry, name: str) -> bool:
    """Whether the manifest marks the environment variable ``name`` as a secret (the vault supplies those)."""
    return any(v.name == name and v.is_secret for p in entry.server.packages for v in p.environment_variables)


def _listed(listing: Listing | None, source: str) -> str:
    if listing is None:
        return "not listed yet"
    return f"{len(listing.tools)} tools ({source})"


def _server_check(
    hub: Hub, name: str, spec: ServerSpec, entry: CatalogEntry | None, secrets: set[str], store: OAuthStore
) -> Check:
    settings = hub.settings
    fails: list[tuple[str, str]] = []
    warns: list[tuple[str, str]] = []
    parts: list[str] = [spec.kind]
    if entry is not None:
        parts.append(f"catalog {entry.meta.category}")
    if isinstance(spec, StdioServerSpec):
        fails, warns = _stdio_problems(settings, name, spec, entry)
        sandbox = hub.launches.get(name)
        parts.append(f"{sandbox.kind} sandbox" if sandbox is not None else "unconfined")
    elif isinstance(spec, InprocServerSpec):
        module = spec.target.partition(":")[0]
        if importlib.util.find_spec(module) is None:
            fails.append((f"module {module!r} does not import", "fix the server's target"))
        parts.append("in-process")
    else:
        parts.append(spec.url)
        _oauth_state(store, name, spec, parts, fails)
    missing = sorted(_secret_refs(spec) - secrets)
    if missing:
        fails.append((f"secret {', '.join(missing)} not in the vault", f"hanzo-hub secrets set {missing[0]}"))
    listing = hub.snapshots.load(name)
    if listing is not None or entry is None or entry.tools is None:
        parts.append(_listed(listing, "snapshot"))
    else:
        parts.append("packaged tool list")
    detail = ", ".join(parts)
    graded: tuple[tuple[Status, list[tuple[str, str]]], ...] = (("fail", fails), ("warn", warns))
    for status, found in graded:
        if found:
            what = "; ".join(f for f, _ in found)
            hints = "; ".join(dict.fromkeys(h for _, h in found))
            return Check(f"server:{name}", status, f"{detail}: {what}", hints)
    return Check(f"server:{name}", "ok", detail)


def _oauth_state(
    store: OAuthStore, name: str, spec: HttpServerSpec | SseServerSpec, parts: list[str], fails: list[tuple[str, str]]
) -> None:
    """A remote server's OAuth login: its expiry when there is one; a failure when the config says the server needs
    one and none is usable. (Without ``oauth`` in the config only ``--probe`` can tell whether the server asks.)"""
    try:
        record = store.load_sync(name)
    except VaultError as exc:
        fails.append((f"its OAuth login cannot be read: {exc}", "see the vault check"))
        return
    if record is not None and record.usable(spec.url):
        parts.append(f"OAuth login ({record.summary()})")
    elif spec.oauth is not None or (record is not None and record.tokens is not None):
        why = "the OAuth login has expired" if record is not None and record.url == spec.url else "no OAuth login"
        fails.append((why, f"hanzo-hub auth login {name}"))


def check_servers(hub: Hub, secrets: set[str]) -> list[Check]:
    """One check a downstream server the hub would serve (nothing is started)."""
    if not hub.servers:
        return [Check("servers", "warn", "no downstream servers", "hanzo-hub import, or add mcpServers to the config")]
    store = OAuthStore(hub.settings.vault_dir, hub.settings.sandbox.keyring_service)  # one vault for every server
    return [
        _server_check(hub, n, s, hub.catalog_entries.get(n), secrets, store) for n, s in sorted(hub.servers.items())
    ]


def _probe_failure(hub: Hub, name: str, said: str) -> Check:
    spec = hub.servers[name]
    label = f"probe:{name}"
    if isinstance(spec, StdioServerSpec):
        return Check(label, "fail", said, f"see {hub.settings.log_dir / (file_key(name) + '.log')}")
    if isinstance(spec, InprocServerSpec):
        if IN_USE in said:  # the hub's memory store, locked by a hub serving this home: that one is fine
            return Check(label, "warn", said, "a hub is serving this home; stop it to probe this server here")
        return Check(label, "fail", said, "run with --log-level INFO to see the server's traceback")
    if "hanzo-hub auth login" in said:
        return Check(label, "fail", said, f"hanzo-hub auth login {name}")
    return Check(label, "fail", said, "is the server up at that URL, and are its headers right?")


async def probe_servers(hub: Hub, timeout: float) -> list[Check]:
    """Run the hub and list every server live (at most ``timeout`` seconds each, started as serving would)."""
    results: dict[str, Check] = {}
    limiter = anyio.CapacityLimiter(hub.settings.backends.start_concurrency)

    async def one(name: str) -> None:
        label = f"probe:{name}"
        async with limiter:
            start = time.perf_counter()
            try:
                with anyio.fail_after(timeout):
                    listing = await hub.pool.get(name).request(lambda c: fetch_listing(c, timeout, name), timeout)
            except TimeoutError:
                results[name] = Check(label, "fail", f"no answer within {timeout:g} s", f"see {hub.settings.log_dir}")
                return
            except Exception as exc:  # the doctor reports whatever a start or a listing raised
                results[name] = _probe_failure(hub, name, str(exc) or type(exc).__name__)
                return
            took = time.perf_counter() - start
            kinds = (("tool", listing.tools), ("resource", listing.resources), ("prompt", listing.prompts))
            counts = ", ".join(f"{len(items)} {kind}{'' if len(items) == 1 else 's'}" for kind, items in kinds)
            if listing.problems:
                shown = "; ".join(listing.problems[:3]) + ("; ..." if len(listing.problems) > 3 else "")
                detail = (
                    f"{counts} live in {took:.2f} s; {len(listing.problems)} list item(s) break the protocol: {shown}"
                )
                hint = "the server's to fix; the hub serves the rest (each is in list_problems of hub://_hub/servers)"
                results[name] = Check(label, "warn", detail, hint)
                return
            results[name] = Check(label, "ok", f"{counts} live in {took:.2f} s")

    async with hub.run(), anyio.create_task_group() as tg:
        for name in sorted(hub.servers):
            tg.start_soon(one, name)
    return [results[name] for name in sorted(results)]
