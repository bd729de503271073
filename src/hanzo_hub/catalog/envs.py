"""Per-server environments: each cataloged Python server in its own venv, each npm server in its own prefix.

``<home>/envs/<id>`` holds the environment. It is built in place (venv scripts carry absolute paths) and stamped
last with a hash of everything it was built from (requirements, pins, post-install steps, interpreter), so:

- a matching stamp means the environment is current and ``install`` does nothing (idempotent);
- a missing or different stamp means it is stale or half-built (a failed or interrupted install writes no stamp),
  and ``install`` deletes it and builds it again (repair).

Python envs are built with ``uv`` when it is available (``pip install uv`` puts it next to the interpreter), else
with ``python -m venv`` + pip. Every subprocess runs through anyio with a deadline; progress goes to a callback.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from hanzo_hub.catalog.loader import CatalogEntry, entry_spec, env_dir, fill, placeholders
from hanzo_hub.catalog.models import CatalogMeta, ServerJson
from hanzo_hub.config import HubSettings, environment
from hanzo_hub.errors import InstallFailed

logger = logging.getLogger(__name__)

STAMP = ".hanzo-catalog-stamp"
OUTPUT_TAIL = 1500
"""Characters of a failed step's output kept in the error."""


@dataclass(frozen=True)
class InstallEvent:
    """One step of an install, for progress bars (``step`` of ``total``; ``done`` on the last event)."""

    server: str
    step: int
    total: int
    message: str
    done: bool = False


ProgressCallback = Callable[[InstallEvent], None]


def _ignore(event: InstallEvent) -> None:
    logger.debug("%s: %s (%d/%d)", event.server, event.message, event.step, event.total)


def requirements(server: ServerJson, meta: CatalogMeta) -> list[str]:
    """What gets installed: the manifest's package at its exact version, then ``install.requirements``.

    Raises:
        InstallFailed: the manifest has no package of the registry its install kind needs.
    """
    registry = {"venv": "pypi", "npm": "npm", "none": None}[meta.install.kind]
    if registry is None:
        return []
    for package in server.packages:
        if package.registry_type == registry:
            sep = "==" if registry == "pypi" else "@"
            return [f"{package.identifier}{sep}{package.version}", *meta.install.requirements]
    raise InstallFailed(meta.id, f"install kind {meta.install.kind!r} needs a {registry} package in 'packages'")


def stamp_of(server: ServerJson, meta: CatalogMeta) -> str:
    """The hash an up-to-date environment of this manifest carries."""
    body = {
        "kind": meta.install.kind,
        "requirements": requirements(server, meta),
        "pins": meta.install.pins,
        "post_install": meta.install.post_install,
        "python": sys.version.split()[0] if meta.install.kind == "venv" else None,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def is_installed(settings: HubSettings, entry: CatalogEntry) -> bool:
    """Whether the environment is complete and built from the current manifest."""
    if entry.meta.install.kind == "none":
        return True
    stamp = env_dir(settings, entry.id) / STAMP
    try:
        current = stamp.read_text(encoding="utf-8").strip() == stamp_of(entry.server, entry.meta)
    except OSError:
        return False
    return current and _launchable(settings, entry)


def _launchable(settings: HubSettings, entry: CatalogEntry) -> bool:
    spec = entry_spec(settings, entry)
    if "/" in spec.command:
        return Path(spec.command).is_file()
    return shutil.which(spec.command) is not None


def uv_binary() -> str | None:
    """The ``uv`` executable next to this interpreter or on PATH."""
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() else shutil.which("uv")


def _child_env() -> dict[str, str]:
    env = environment()
    env.update(
        PUPPETEER_SKIP_DOWNLOAD="1",  # puppeteer-based servers would download Chromium at install time
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        UV_NO_PROGRESS="1",
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
    )
    return env


async def _run(server: str, what: str, command: Sequence[str], cwd: Path | None, timeout: float) -> None:
    """Run one install step; raise InstallFailed with the tail of its output if it fails or overruns."""
    try:
        with anyio.fail_after(timeout):
            result = await anyio.run_process(list(command), cwd=cwd, env=_child_env(), check=False, stdin=None)
    except TimeoutError:
        raise InstallFailed(server, f"{what} took longer than {timeout:.0f}s") from None
    except OSError as exc:
        raise InstallFailed(server, f"{what}: cannot run {command[0]!r}: {exc.strerror}") from None
    if result.returncode != 0:
        output = (result.stderr or b"").decode(errors="replace") + (result.stdout or b"").decode(errors="replace")
        raise InstallFailed(server, f"{what} failed (exit {result.returncode}): {_summary(output)}")


def _summary(output: str) -> str:
    """The useful part of an installer's output: uv/pip resolution errors, else the last lines."""
    text = output.strip()
    for marker in ("No solution found", "ResolutionImpossible", "No matching distribution", "ETARGET", "E404"):
        at = text.find(marker)
        if at >= 0:
            return text[at : at + OUTPUT_TAIL]
    return text[-OUTPUT_TAIL:]


def _python_steps(settings: HubSettings, entry: CatalogEntry, env: Path) -> list[tuple[str, list[str], Path | None]]:
    reqs = requirements(entry.server, entry.meta)
    constraints = env / "constraints.txt"
    pins = ["-c", str(constraints)] if entry.meta.install.pins else []
    uv = uv_binary() if settings.catalog.installer in ("auto", "uv") else None
    if settings.catalog.installer == "uv" and uv is None:
        raise InstallFailed(entry.id, "catalog.installer is 'uv' but no uv executable was found")
    python = env / "bin" / "python"
    if uv is not None:
        return [
            ("create venv", [uv, "venv", "--quiet", "--python", sys.executable, str(env)], None),
            (
                "install " + " ".join(reqs),
                [uv, "pip", "install", "--quiet", "--python", str(python), *reqs, *pins],
                None,
            ),
        ]
    return [
        ("create venv", [sys.executable, "-m", "venv", str(env)], None),
        ("install " + " ".join(reqs), [str(python), "-m", "pip", "install", "-q", *reqs, *pins], None),
    ]


def _npm_steps(entry: CatalogEntry, env: Path) -> list[tuple[str, list[str], Path | None]]:
    reqs = requirements(entry.server, entry.meta)
    return [
        (
            "npm install " + " ".join(reqs),
            ["npm", "install", "--prefix", str(env), "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            env,
        )
    ]


def _write_inputs(entry: CatalogEntry, env: Path) -> None:
    """Files the installers read: pip constraints, or an npm package.json with exact versions and overrides."""
    env.mkdir(parents=True, exist_ok=True)
    pins = entry.meta.install.pins
    if entry.meta.install.kind == "npm":
        deps = {}
        for req in requirements(entry.server, entry.meta):
            name, _, version = req.rpartition("@")
            deps[name] = version
        overrides = {p.rpartition("@")[0]: p.rpartition("@")[2] for p in pins}
        package = {"name": f"hanzo-env-{entry.id}", "private": True, "dependencies": deps, "overrides": overrides}
        (env / "package.json").write_text(json.dumps(package, indent=2) + "\n", encoding="utf-8")
    elif pins:
        (env / "constraints.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")


LOCK_TIMEOUT = 900.0
"""How long an install waits for another process installing the same server."""


@contextlib.asynccontextmanager
async def _locked(settings: HubSettings, server: str) -> AsyncIterator[None]:
    """Serialise installs of one server across processes (two hubs, or a hub and the CLI)."""
    settings.envs_dir.mkdir(parents=True, exist_ok=True)
    with (settings.envs_dir / f".{server}.lock").open("w") as fh:
        try:
            with anyio.fail_after(LOCK_TIMEOUT):
                await anyio.to_thread.run_sync(fcntl.flock, fh.fileno(), fcntl.LOCK_EX, abandon_on_cancel=True)
        except TimeoutError:
            raise InstallFailed(server, "another install of it did not finish in time") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


async def install(
    settings: HubSettings, entry: CatalogEntry, *, force: bool = False, progress: ProgressCallback | None = None
) -> bool:
    """Build the environment of ``entry`` unless it is current; returns whether anything was built.

    Raises:
        InstallFailed: a step failed (a pin that cannot be resolved, a missing package, a timeout); the
            environment is left unstamped, so the next call starts over.
    """
    report = progress or _ignore
    if entry.meta.install.kind == "none":
        report(InstallEvent(entry.id, 1, 1, "nothing to install", done=True))
        return False
    async with _locked(settings, entry.id):
        if not force and is_installed(settings, entry):
            report(InstallEvent(entry.id, 1, 1, "up to date", done=True))
            return False
        await _build(settings, entry, report)
    return True


async def _build(settings: HubSettings, entry: CatalogEntry, report: ProgressCallback) -> None:
    meta = entry.meta
    env = env_dir(settings, entry.id)
    values = placeholders(settings, meta)
    if env.exists():
        report(InstallEvent(entry.id, 0, 1, "removing stale or incomplete environment"))
        await anyio.to_thread.run_sync(shutil.rmtree, env)
    env.parent.mkdir(parents=True, exist_ok=True)
    steps = _python_steps(settings, entry, env) if meta.install.kind == "venv" else _npm_steps(entry, env)
    steps += [(f"post-install {cmd[0]}", [fill(w, values) for w in cmd], None) for cmd in meta.install.post_install]
    total = len(steps) + 1
    timeout = min(meta.install.timeout_seconds, settings.catalog.install_timeout)
    for index, (what, command, cwd) in enumerate(steps, start=1):
        report(InstallEvent(entry.id, index - 1, total, what))
        if what.startswith(("install", "npm install")):
            _write_inputs(entry, env)
        await _run(entry.id, what, command, cwd, timeout)
    if not _launchable(settings, entry):
        raise InstallFailed(
            entry.id, f"installed, but the launch command {entry_spec(settings, entry).command} is missing"
        )
    (env / STAMP).write_text(stamp_of(entry.server, meta) + "\n", encoding="utf-8")
    report(InstallEvent(entry.id, total, total, "installed", done=True))
