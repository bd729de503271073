"""Manifest models: a registry ``server.json`` with the hub's fields under ``_meta``, and the ``tools.json`` snapshot.

``server.json`` follows the official MCP registry's ``server.json`` (2025-12-11): ``name``, ``description``,
``version``, ``packages[]`` and ``remotes[]``. Everything the hub needs beyond that lives under
``_meta["dev.hanzo-hub/catalog"]`` (:class:`CatalogMeta`), whose JSON Schema ships as ``meta.schema.json`` next to
this module (regenerate with ``python -m hanzo_hub.catalog.models > src/hanzo_hub/catalog/meta.schema.json``).

Launch templates may use these placeholders: ``{env}`` (the server's environment directory), ``{bin}`` (its
executables: ``{env}/bin`` for a venv, ``{env}/node_modules/.bin`` for npm), ``{home}`` (the hub's home),
``{project}`` (the project folder), ``{site}`` (a venv's site-packages, for post-install steps) and ``{python}``
(the hub's own interpreter, which runs the first-party servers in ``servers/``: ``{python} -m servers.<id>``).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from hanzo_hub.templates import check_launch_templates

META_KEY = "dev.hanzo-hub/catalog"
"""Our namespace under ``_meta`` (reverse DNS of the project)."""

REGISTRY_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"

CATEGORIES: tuple[str, ...] = (
    "code-execution",
    "files",
    "web",
    "database",
    "api",
    "devops",
    "data",
    "communication",
    "version-control",
    "cloud",
    "ai-ml",
    "system",
)
Category = Literal[
    "code-execution",
    "files",
    "web",
    "database",
    "api",
    "devops",
    "data",
    "communication",
    "version-control",
    "cloud",
    "ai-ml",
    "system",
]
ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,23}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


# --- the registry's server.json -------------------------------------------------------------------------------


class Transport(_Model):
    """How a package speaks MCP once launched."""

    type: Literal["stdio", "streamable-http", "sse"] = "stdio"
    url: str | None = None


class Argument(_Model):
    """A package or runtime argument (registry shape)."""

    type: Literal["positional", "named"]
    name: str | None = None
    value: str | None = None
    value_hint: str | None = None
    description: str | None = None
    is_required: bool = False
    is_repeated: bool = False
    default: str | None = None


class EnvironmentVariable(_Model):
    """An environment variable a package reads (registry shape)."""

    name: str = Field(min_length=1)
    description: str | None = None
    is_required: bool = False
    is_secret: bool = False
    default: str | None = None
    value: str | None = None
    format: str | None = None


class Package(_Model):
    """One installable package of the server."""

    registry_type: Literal["pypi", "npm", "oci"]
    registry_base_url: str | None = None
    identifier: str = Field(min_length=1)
    version: str = Field(min_length=1, description="an exact version, never a range")
    runtime_hint: str | None = None
    transport: Transport = Field(default_factory=Transport)
    runtime_arguments: list[Argument] = Field(default_factory=list)
    package_arguments: list[Argument] = Field(default_factory=list)
    environment_variables: list[EnvironmentVariable] = Field(default_factory=list)
    file_sha256: str | None = None

    @field_validator("version")
    @classmethod
    def _exact(cls, value: str) -> str:
        if value == "latest" or any(ch in value for ch in "<>=^~*| "):
            raise ValueError(f"version must be exact, not {value!r}")
        return value


class Header(_Model):
    """A header a remote needs."""

    name: str
    description: str | None = None
    is_required: bool = False
    is_secret: bool = False
    value: str | None = None


class Remote(_Model):
    """A hosted endpoint of the server."""

    type: Literal["streamable-http", "sse"]
    url: str = Field(pattern=r"^https?://")
    headers: list[Header] = Field(default_factory=list)


class Repository(_Model):
    """Where the server's source lives."""

    url: str
    source: str
    id: str | None = None
    subfolder: str | None = None


# --- our _meta -------------------------------------------------------------------------------------------------


class Install(_Model):
    """How the server's environment is built. Requirements default to the first package at its exact version."""

    kind: Literal["venv", "npm", "none"]
    requirements: list[str] = Field(default_factory=list, description="extra packages installed with the server")
    pins: list[str] = Field(
        default_factory=list,
        description="constraints: pip specifiers (mcp<2) for venvs, name@version overrides for npm",
    )
    post_install: list[list[str]] = Field(default_factory=list, description="commands run after install")
    timeout_seconds: float = Field(default=600.0, gt=0)

    @field_validator("post_install")
    @classmethod
    def _templates(cls, value: list[list[str]]) -> list[list[str]]:
        for command in value:
            if not command:
                raise ValueError("a post-install command needs at least one word")
            check_launch_templates(command)
        return value


class Launch(_Model):
    """How the hub starts the server (templates; see the module docstring for placeholders)."""

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    make_dirs: list[str] = Field(default_factory=list, description="folders created before launch (data dirs)")
    startup_timeout_seconds: float = Field(default=30.0, gt=0)
    call_timeout_seconds: float | None = Field(default=None, gt=0)
    protocol: Literal["auto", "legacy", "2026-07-28"] = Field(
        default="auto", description="'legacy' for servers that break on the 2026 discovery probe (old SDKs)"
    )

    @model_validator(mode="after")
    def _templates(self) -> Launch:
        check_launch_templates(
            [self.command, *self.args, *self.env.values(), *self.make_dirs, *([self.cwd] if self.cwd else [])]
        )
        return self


class FsGrants(_Model):
    """Paths (templates) the server may read or write."""

    read: list[str] = Field(default_factory=list)
    write: list[str] = Field(default_factory=list)


class ToolLimits(_Model):
    """The per-call policy a manifest declares for one tool (unset fields fall back to the server's category).

    Config (``sandbox.servers.<name>.tools``) overrides it field by field.
    """

    path_args: list[str] | None = Field(
        default=None, description="arguments holding local file paths: exactly these (unset: detected by name)"
    )
    url_args: list[str] | None = Field(
        default=None, description="arguments holding URLs: exactly these (unset: detected by name)"
    )
    writable: bool | None = Field(default=None, description="whether the tool writes to its path arguments")
    allow_hosts: list[str] | None = None
    deny_hosts: list[str] | None = None
    allow_private_network: bool | None = None
    rate_per_minute: float | None = Field(default=None, gt=0)
    burst: int | None = Field(default=None, ge=1)
    timeout_seconds: float | None = Field(default=None, gt=0)
    max_result_bytes: int | None = Field(default=None, gt=0)
    enabled: bool | None = Field(default=None, description="false: the hub refuses calls of this tool")


class SandboxPolicy(_Model):
    """The default sandbox for the server; the sandbox layer enforces it."""

    backend: Literal["bwrap", "docker", "none"] | None = Field(
        default=None,
        description="what the server is launched in (default: the hub's sandbox.backend); 'none' for a server "
        "that isolates its own work (bubblewrap cannot nest) or needs the host's Docker socket",
    )
    network: Literal["none", "loopback", "full"] = "none"
    fs: FsGrants = Field(default_factory=FsGrants)
    env_passthrough: list[str] = Field(default_factory=list)
    max_result_bytes: int = Field(default=1024 * 1024, gt=0)
    tools: dict[str, ToolLimits] = Field(default_factory=dict, description="per-call policy of single tools")


class Offline(_Model):
    """Whether the server works on a machine without internet (V/L/P/N of the catalog notes)."""

    status: Literal["verified", "listed", "plausible", "online-only"]
    backend: str | None = Field(default=None, description="the local service its calls need")
    notes: str | None = None


class Telemetry(_Model):
    """Switches that keep a server from phoning home; the hub always applies them at launch."""

    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class ToolOverride(_Model):
    """A correction to one tool as the server lists it."""

    rename: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    hidden: bool = False
    description: str | None = None
    reason: str | None = None


class Requires(_Model):
    """What must exist on the machine besides the environment."""

    binaries: list[str] = Field(default_factory=list)
    services: list[str] = Field(default_factory=list)


class CatalogMeta(_Model):
    """The hub's fields of a manifest, under ``_meta["dev.hanzo-hub/catalog"]``."""

    id: str = Field(pattern=ID_PATTERN, description="catalog id; also the server's name in the hub")
    category: Category
    origin: Literal["third-party", "first-party", "fixture", "user"] = "third-party"
    license: str | None = None
    install: Install
    launch: Launch
    requires: Requires = Field(default_factory=Requires)
    sandbox: SandboxPolicy = Field(default_factory=SandboxPolicy)
    offline: Offline
    telemetry: Telemetry = Field(default_factory=Telemetry)
    tool_overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    error_patterns: list[str] = Field(
        default_factory=list,
        description="regexes matched from the start of a result's text; a match sets isError (servers that report "
        "failures as plain text)",
    )
    tools_file: str = Field(default="tools.json", pattern=r"^[\w.-]+\.json$")
    dynamic: bool = Field(default=False, description="the tool set is generated (OpenAPI, botocore): recapture it")

    @field_validator("error_patterns")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"error pattern {pattern!r} is not a regular expression: {exc}") from None
        return value


class ServerJson(_Model):
    """A registry ``server.json``; ``hub`` is our parsed ``_meta`` entry."""

    schema_: str = Field(default=REGISTRY_SCHEMA, alias="$schema")
    name: str = Field(pattern=r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$", min_length=3, max_length=200)
    description: str = Field(min_length=1, max_length=100)
    title: str | None = Field(default=None, max_length=100)
    version: str = Field(min_length=1, max_length=255)
    website_url: str | None = None
    repository: Repository | None = None
    packages: list[Package] = Field(default_factory=list)
    remotes: list[Remote] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict, alias="_meta")

    @property
    def hub(self) -> CatalogMeta:
        """Our entry of ``_meta`` (validated when the manifest is loaded)."""
        return CatalogMeta.model_validate(self.meta[META_KEY])

    @model_validator(mode="after")
    def _has_meta(self) -> ServerJson:
        if META_KEY not in self.meta:
            raise ValueError(f"_meta needs a {META_KEY!r} entry")
        return self


# --- tools.json ------------------------------------------------------------------------------------------------


def tools_hash(tools: list[dict[str, Any]]) -> str:
    """SHA-256 of the canonical JSON of ``tools`` (sorted keys, no whitespace)."""
    canonical = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class ToolsSnapshot(_Model):
    """A server's ``tools/list`` as it answered (wire shape, pages merged) and the hash of it."""

    snapshot_at: str
    protocol_version: str | None = None
    server_info: dict[str, Any] | None = None
    capabilities: dict[str, Any] = Field(default_factory=dict)
    dynamic: bool = False
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tools: list[dict[str, Any]]

    @model_validator(mode="after")
    def _consistent(self) -> ToolsSnapshot:
        for index, tool in enumerate(self.tools):
            try:
                types.Tool.model_validate(tool)
            except ValueError as exc:
                raise ValueError(f"tools[{index}] is not a valid tool: {exc}") from None
        if tools_hash(self.tools) != self.sha256:
            raise ValueError("sha256 does not match the tools (edited by hand? run 'hanzo-hub catalog refresh')")
        return self

    def tool_models(self) -> list[types.Tool]:
        """The tools as SDK models."""
        return [types.Tool.model_validate(tool) for tool in self.tools]

    @property
    def names(self) -> list[str]:
        """Tool names in listed order."""
        return [str(tool.get("name")) for tool in self.tools]


def meta_schema() -> dict[str, Any]:
    """The JSON Schema of our ``_meta`` entry, as shipped in ``meta.schema.json``."""
    schema = CatalogMeta.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


if __name__ == "__main__":  # pragma: no cover - regeneration helper
    import sys

    sys.stdout.write(json.dumps(meta_schema(), indent=2) + "\n")
