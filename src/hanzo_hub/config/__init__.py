"""Settings: the only module that reads the environment, ``.env`` and config files.

Precedence, highest first: command-line flags (passed as keyword arguments), ``HANZO_HUB_*`` environment variables
(nested with ``__``, e.g. ``HANZO_HUB_HTTP__PORT``), the config file, defaults. The config file is JSON (or TOML by
extension) holding hub sections (``http``, ``backends``, ``exposure``...) and downstream servers in the formats users
already have: Claude Desktop's ``mcpServers`` and VS Code's ``servers``.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, TypeVar

import platformdirs
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from hanzo_hub.config._base import _Model
from hanzo_hub.config.embedding import EmbeddingSettings
from hanzo_hub.config.exposure import ExposureSettings
from hanzo_hub.config.llm import LlmSettings
from hanzo_hub.config.memory import MemorySettings, MemoryTierSettings
from hanzo_hub.config.servers import (
    HttpServerSpec,
    InprocServerSpec,
    OAuthClientSpec,
    ServerSpec,
    SseServerSpec,
    StdioServerSpec,
    ToolFilterSpec,
    ToolOverrideSpec,
    normalize_server_entry,
)
from hanzo_hub.errors import ConfigError
from hanzo_hub.templates import check_launch_templates

__all__ = [
    "AuthSettings",
    "BackendSettings",
    "CatalogInstanceSpec",
    "CatalogOverrideSpec",
    "CatalogSettings",
    "EmbeddingSettings",
    "ExposureSettings",
    "OAuthClientSpec",
    "ToolFilterSpec",
    "OAuthSettings",
    "TokenSpec",
    "HttpServerSpec",
    "HttpSettings",
    "HubSettings",
    "InprocServerSpec",
    "MemorySettings",
    "MemoryTierSettings",
    "ServerSpec",
    "SandboxLimitsSettings",
    "SandboxSettings",
    "ServerPolicySpec",
    "ToolPolicySpec",
    "ToolOverrideSpec",
    "SseServerSpec",
    "StdioServerSpec",
    "load_settings",
    "normalize_server_entry",
    "read_config_file",
]


class HttpSettings(_Model):
    """Serving the hub over streamable HTTP."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    path: str = Field(default="/mcp", pattern=r"^/[\w./-]*$")
    stateless: bool = Field(default=False, description="Serve 2025-11-25 clients without sessions.")
    json_response: bool = False
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    max_sessions: int = Field(default=1000, gt=0)
    metrics: bool = Field(default=True, description="Serve Prometheus metrics at /metrics (behind the same auth).")


class TokenSpec(_Model):
    """A static bearer token, stored only as its SHA-256, and the user it stands for."""

    user: str = Field(min_length=1, max_length=128)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="hex SHA-256 of the token (hanzo-hub token new)")


class OAuthSettings(_Model):
    """The hub as an OAuth 2.1 resource server: JWT access tokens checked against the issuer's JWKS."""

    issuer: str = Field(pattern=r"^https?://")
    audience: str = Field(min_length=1, description="the hub's resource identifier the tokens must name")
    jwks_url: str = Field(pattern=r"^https?://")
    algorithms: tuple[str, ...] = ("RS256", "ES256", "PS256", "EdDSA")
    required_scopes: tuple[str, ...] = ()
    leeway: float = Field(default=30.0, ge=0, description="clock skew allowed on exp/nbf/iat, seconds")
    user_claim: str = "sub"
    jwks_cache: float = Field(default=300.0, gt=0, description="seconds a fetched JWKS is trusted")


class AuthSettings(_Model):
    """Who may use the HTTP endpoint. Without tokens or OAuth, only loopback binds are allowed."""

    tokens: tuple[TokenSpec, ...] = ()
    oauth: OAuthSettings | None = None

    @property
    def enabled(self) -> bool:
        """Whether any authentication is configured."""
        return bool(self.tokens) or self.oauth is not None


class BackendSettings(_Model):
    """Downstream connections and their supervision. Every wait has a bound."""

    connect_timeout: float = Field(default=30.0, gt=0)
    call_timeout: float = Field(default=120.0, gt=0)
    shutdown_timeout: float = Field(default=5.0, gt=0)
    list_wait: float = Field(default=5.0, ge=0, description="How long a list waits for servers without a snapshot.")
    idle_timeout: float = Field(default=600.0, ge=0, description="Stop a server after this many idle seconds; 0=never.")
    max_running: int = Field(default=32, ge=1, description="Cap on concurrently running downstream servers.")
    restart_backoff: float = Field(default=0.5, gt=0, description="First restart delay; doubles per failure.")
    restart_backoff_max: float = Field(default=30.0, gt=0)
    breaker_threshold: int = Field(default=5, ge=1, description="Consecutive failures that open the circuit.")
    breaker_cooldown: float = Field(default=60.0, gt=0)
    start_concurrency: int = Field(default=8, ge=1, description="Servers started at once during discovery.")
    log_max_bytes: int = Field(
        default=10 * 1024**2,
        ge=0,
        description="Rotate a stdio server's stderr log (logs/<server>.log) at this size; 0=never.",
    )
    log_backups: int = Field(default=2, ge=0, description="Rotated stderr logs kept per server (<server>.log.1, ...).")
    max_message_bytes: int = Field(
        default=64 * 1024**2,
        ge=0,
        description="A stdio server's message (one line on its stdout) longer than this is dropped, and the request "
        "it answered gets an error instead of waiting out its timeout; 0=no cap.",
    )
    watch_config: float = Field(
        default=2.0, ge=0, description="Seconds between checks of the config file for changed servers; 0=never."
    )
    oauth_prompt: bool = Field(
        default=True, description="Offer the calling client's user an OAuth login when a remote server needs one."
    )


NetworkMode = Literal["none", "loopback", "full"]
SandboxKind = Literal["bwrap", "docker", "none"]


class SandboxLimitsSettings(_Model):
    """Resource limits for a sandboxed process (code execution defaults: 2 CPUs, 4 GiB, 60 s, no network)."""

    cpus: float | None = Field(default=2.0, gt=0)
    memory_bytes: int | None = Field(default=4 * 1024**3, gt=0)
    pids: int | None = Field(default=256, gt=0)
    wall_seconds: float | None = Field(default=60.0, gt=0)
    cpu_seconds: float | None = Field(default=None, gt=0, description="RLIMIT_CPU; default: wall x cpus.")
    file_size_bytes: int | None = Field(default=256 * 1024**2, gt=0)
    output_bytes: int = Field(default=1024 * 1024, gt=0, description="stdout/stderr kept per stream by run().")
    network: NetworkMode = "none"


class ToolPolicySpec(_Model):
    """Per-call policy of a tool; every unset field falls back to the server, then the category, then defaults."""

    path_args: tuple[str, ...] | None = Field(
        default=None, description="Argument names holding local file paths (exactly these; unset: detected)."
    )
    url_args: tuple[str, ...] | None = Field(
        default=None, description="Argument names holding URLs (exactly these; unset: detected)."
    )
    writable: bool | None = None
    allow_hosts: tuple[str, ...] | None = Field(default=None, description="fnmatch patterns; empty = any host.")
    deny_hosts: tuple[str, ...] | None = None
    allow_private_network: bool | None = Field(default=None, description="Grant loopback/private/metadata URLs.")
    rate_per_minute: float | None = Field(default=None, gt=0)
    burst: int | None = Field(default=None, ge=1)
    timeout: float | None = Field(default=None, gt=0)
    max_result_bytes: int | None = Field(default=None, gt=0)
    enabled: bool | None = None


class ServerPolicySpec(_Model):
    """Policy of one downstream server: its sandbox, category, limits and per-tool overrides."""

    sandbox: SandboxKind | None = Field(default=None, description="Launch the (stdio) server in this sandbox.")
    category: str | None = None
    limits: SandboxLimitsSettings | None = None
    read: tuple[Path, ...] = Field(default=(), description="Directories the sandboxed server may read.")
    write: tuple[Path, ...] = Field(default=(), description="Directories the sandboxed server may write.")
    defaults: ToolPolicySpec = Field(default_factory=ToolPolicySpec)
    tools: dict[str, ToolPolicySpec] = Field(default_factory=dict)


class SandboxSettings(_Model):
    """Isolation backends, per-call policy and the secrets vault."""

    backend: SandboxKind = Field(default="bwrap", description="Default sandbox for stdio servers and code.")
    limits: SandboxLimitsSettings = Field(default_factory=SandboxLimitsSettings)
    roots: dict[str, tuple[Path, ...]] = Field(
        default_factory=dict, description="Allowed path roots per user id; '*' applies to every user."
    )
    categories: dict[str, ToolPolicySpec] = Field(default_factory=dict, description="Overrides per category.")
    servers: dict[str, ServerPolicySpec] = Field(default_factory=dict)
    calls_per_turn: int = Field(default=25, ge=1)
    calls_per_session: int = Field(default=1000, ge=1)
    cgroup_root: Path | None = Field(default=None, description="Delegated cgroup v2 subtree; default: own cgroup.")
    docker_host: str | None = Field(default=None, description="Docker-API socket URL; default: DOCKER_HOST.")
    docker_image: str = "hanzo-sbx:2"
    docker_warm: int = Field(default=0, ge=0, description="Warm containers kept for run() (exec_run).")
    keyring_service: str | None = Field(default="hanzo-hub", description="None: never use the OS keyring.")


class CatalogOverrideSpec(_Model):
    """A user's change to one catalog server's launch; the server stays a catalog server (sandbox, policy, patterns).

    Values are templates with the manifest's placeholders (``{project}``, ``{env}``, ``{home}``...).
    """

    args: tuple[str, ...] | None = Field(default=None, description="Replaces the manifest's launch arguments.")
    extra_args: tuple[str, ...] = Field(default=(), description="Appended to the (possibly replaced) arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Merged over the manifest's launch environment.")
    tools: ToolFilterSpec | None = Field(default=None, description="Expose only some tools: allow/deny patterns.")

    @model_validator(mode="after")
    def _templates(self) -> CatalogOverrideSpec:
        check_launch_templates([*(self.args or ()), *self.extra_args, *self.env.values()])
        return self


V = TypeVar("V")


def _check_names(kind: str, named: dict[str, V]) -> dict[str, V]:
    """``named`` unchanged, once each name is a usable server name.

    Raises:
        ValueError: a name is empty, longer than 128 characters or holds whitespace.
    """
    for name in named:
        if not name or len(name) > 128 or any(ch.isspace() for ch in name):
            raise ValueError(f"{kind} name {name!r} must be 1-128 characters without whitespace")
    return named


class CatalogInstanceSpec(CatalogOverrideSpec):
    """One more server launched from a catalog entry, under its own name and with its own changes (the same fields as
    an override), e.g. a second database for dbhub or a second API for openapi. It is a catalog server like the
    entry's own: same environment, sandbox, per-call policy, tool overrides and error patterns."""

    entry: str = Field(min_length=1, description="The catalog id it is launched from.")


class CatalogSettings(_Model):
    """The catalog of downstream servers: where manifests and per-server environments live, and which are on.

    A server is served when it is in ``enabled`` here or was enabled with ``hanzo-hub catalog enable`` (recorded in
    ``<home>/catalog/state.json``), and was not disabled there since.
    """

    enabled: tuple[str, ...] = Field(default=(), description="Catalog ids to serve (in addition to the state file).")
    manifest_dirs: tuple[Path, ...] = Field(default=(), description="Extra manifest folders; later ones win.")
    packaged: bool = Field(default=True, description="Include the manifests shipped with hanzo-hub.")
    project: Path | None = Field(default=None, description="The folder '{project}' stands for (default: cwd).")
    installer: Literal["auto", "uv", "pip"] = Field(default="auto", description="How Python envs are built.")
    install_timeout: float = Field(default=600.0, gt=0, description="Bound on one install step, seconds.")
    install_on_start: bool = Field(
        default=True, description="Build a catalog server's environment when the hub first starts it, if missing."
    )
    overrides: dict[str, CatalogOverrideSpec] = Field(
        default_factory=dict, description="Per-server changes to a catalog launch: 'args', 'extra_args', 'env'."
    )
    instances: dict[str, CatalogInstanceSpec] = Field(
        default_factory=dict,
        description="More servers launched from catalog entries, by server name: 'entry' plus an override's fields.",
    )

    @field_validator("instances")
    @classmethod
    def _instance_names(cls, value: dict[str, CatalogInstanceSpec]) -> dict[str, CatalogInstanceSpec]:
        return _check_names("instance", value)


class HubSettings(BaseSettings):
    """Everything the hub is configured with."""

    model_config = SettingsConfigDict(
        env_prefix="HANZO_HUB_", env_nested_delimiter="__", extra="forbid", frozen=True, env_file=None
    )

    home: Path = Field(default_factory=lambda: platformdirs.user_data_path("hanzo-hub"))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto",
        description="The event loop `hanzo-hub serve` runs on: 'auto' is uvloop where it is installed (it is a "
        "dependency on Linux and macOS), else the standard asyncio loop; 'uvloop' requires it.",
    )
    user: str = Field(default_factory=lambda: _local_user(), description="User id for requests over stdio.")
    http: HttpSettings = Field(default_factory=HttpSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    backends: BackendSettings = Field(default_factory=BackendSettings)
    exposure: ExposureSettings = Field(default_factory=ExposureSettings)
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    servers: dict[str, ServerSpec] = Field(default_factory=dict)
    config_file: Path | None = Field(default=None, exclude=True)

    @field_validator("servers", mode="before")
    @classmethod
    def _normalize_servers(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        normalized = {}
        for name, entry in value.items():
            try:
                normalized[name] = normalize_server_entry(entry)
            except ValueError as exc:
                raise ValueError(f"server '{name}': {exc}") from None
        return normalized

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_names("server", value)

    @model_validator(mode="after")
    def _unique_aliases(self) -> HubSettings:
        seen: dict[str, str] = {}
        for name, spec in self.servers.items():
            if spec.alias is None:
                continue
            if spec.alias in seen:
                raise ValueError(f"servers '{seen[spec.alias]}' and '{name}' share alias '{spec.alias}'")
            seen[spec.alias] = name
        return self

    @property
    def snapshot_dir(self) -> Path:
        """Where per-server list snapshots live."""
        return self.home / "snapshots"

    @property
    def vault_dir(self) -> Path:
        """Where the encrypted secrets vault (and its key file, without a keyring) lives."""
        return self.home / "vault"

    @property
    def envs_dir(self) -> Path:
        """Where cataloged servers get their own environments (one venv or npm prefix per id)."""
        return self.home / "envs"

    @property
    def catalog_dir(self) -> Path:
        """Where the catalog keeps its state, refreshed ``tools.json`` files and user-added manifests."""
        return self.home / "catalog"

    @property
    def memory_dir(self) -> Path:
        """Where persistent memories live (unless ``memory.path`` says otherwise)."""
        return self.memory.path or self.home / "memory"

    @property
    def log_dir(self) -> Path:
        """Where downstream stderr logs live."""
        return self.home / "logs"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _ConfigFileSource(settings_cls))


_FILE_DATA: ContextVar[dict[str, Any]] = ContextVar("hanzo_hub_config_file_data", default={})  # noqa: B039


class _ConfigFileSource(PydanticBaseSettingsSource):
    """Feeds the parsed config file (set by ``load_settings``) into the settings."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return _FILE_DATA.get().get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_DATA.get())


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a hub config file: JSON, or TOML for ``*.toml``. ``mcpServers`` and ``servers`` merge into ``servers``.

    Raises:
        ConfigError: the file cannot be read or parsed, or names a server twice.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be an object")
    servers: dict[str, Any] = {}
    for key in ("servers", "mcpServers"):
        block = data.pop(key, None)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise ConfigError(f"{path}: '{key}' must be an object mapping server names to entries")
        for name, entry in block.items():
            if name in servers:
                raise ConfigError(f"{path}: server '{name}' is defined in both 'servers' and 'mcpServers'")
            servers[name] = entry
    if servers:
        data["servers"] = servers
    data.pop("inputs", None)  # VS Code prompts for these interactively; the hub has no use for them
    return data


def _locate(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p in _KIND_TAGS)]
    return ".".join(parts) or "(top level)"


_KIND_TAGS = frozenset({"stdio", "http", "sse", "inproc"})


def default_config_file(home: Path | None = None) -> Path | None:
    """The config file used when none is given: ``$HANZO_HUB_CONFIG``, else ``<home>/config.json`` if it exists."""
    explicit = os.environ.get("HANZO_HUB_CONFIG")
    if explicit:
        return Path(explicit)
    root = home or Path(os.environ.get("HANZO_HUB_HOME") or platformdirs.user_data_path("hanzo-hub"))
    candidate = root / "config.json"
    return candidate if candidate.is_file() else None


def load_settings(config_file: Path | None = None, **overrides: Any) -> HubSettings:
    """Build the settings from flags (``overrides``), the environment and a config file.

    Raises:
        ConfigError: anything invalid, naming the file, the key and the problem.
    """
    home = overrides.get("home")
    path = config_file if config_file is not None else default_config_file(Path(home) if home is not None else None)
    data = read_config_file(path) if path is not None else {}
    token = _FILE_DATA.set(data)
    try:
        return HubSettings(config_file=path, **overrides)
    except ValidationError as exc:
        where = str(path) if path is not None else "settings"
        problems = "; ".join(f"{_locate(err['loc'])}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"{where}: {problems}") from None
    finally:
        _FILE_DATA.reset(token)


def user_config_home(home: Path) -> Path:
    """Where desktop applications keep their settings on this platform (for importing client configs)."""
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")


def environment() -> dict[str, str]:
    """A copy of the process environment, for components that pass it to children (the only sanctioned reader)."""
    return dict(os.environ)
