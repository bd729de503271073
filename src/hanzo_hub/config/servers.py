"""Downstream server entries in the config: how each server is launched or reached, and the hub's options for it
(alias, protocol, timeouts, tool filters and overrides, error patterns, OAuth client settings)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator

from hanzo_hub.config._base import _Model

__all__ = [
    "ALIAS_PATTERN",
    "HttpServerSpec",
    "InprocServerSpec",
    "OAuthClientSpec",
    "ServerSpec",
    "SseServerSpec",
    "StdioServerSpec",
    "ToolFilterSpec",
    "ToolOverrideSpec",
    "normalize_server_entry",
]

ALIAS_PATTERN = re.compile(r"^[A-Za-z0-9-]{1,24}$")
ProtocolMode = Literal["auto", "legacy", "2026-07-28"]


class ToolOverrideSpec(_Model):
    """A correction to one downstream tool as the hub exposes it: hide it, rename it, or fix its description."""

    hidden: bool = False
    rename: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None


class ToolFilterSpec(_Model):
    """Which of a server's tools the hub exposes, by shell-style patterns of the server's own tool names
    (``fnmatch``, case-sensitive): with ``allow``, only tools matching one of its patterns; then none matching
    ``deny``. A tool filtered out is neither listed nor callable."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    @field_validator("allow", "deny")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not pattern.strip() for pattern in value):
            raise ValueError("a tool pattern must not be empty")
        return value

    def admits(self, name: str) -> bool:
        """Whether the tool ``name`` passes the filter."""
        if self.allow and not any(fnmatch.fnmatchcase(name, p) for p in self.allow):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.deny)


class _ServerBase(_Model):
    alias: str | None = Field(
        default=None, description="Short prefix for exposed names (letters, digits, '-'; at most 24 characters)."
    )
    enabled: bool = True
    protocol: ProtocolMode = Field(default="auto", description="How to negotiate with the server.")
    call_timeout: float | None = Field(default=None, gt=0, description="Overrides backends.call_timeout.")
    tool_overrides: dict[str, ToolOverrideSpec] = Field(
        default_factory=dict, description="Per tool (the server's own name): hide, rename or re-describe it."
    )
    tools: ToolFilterSpec | None = Field(default=None, description="Expose only some tools: allow/deny patterns.")
    error_patterns: tuple[str, ...] = Field(
        default=(), description="Regexes matched from the start of a result's text: a match marks it isError."
    )

    @field_validator("error_patterns")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"error pattern {pattern!r} is not a regular expression: {exc}") from None
        return value

    @field_validator("alias")
    @classmethod
    def _alias_shape(cls, value: str | None) -> str | None:
        if value is not None and not ALIAS_PATTERN.match(value):
            raise ValueError("alias must be 1-24 letters, digits or '-'")
        return value


class StdioServerSpec(_ServerBase):
    """A server launched as a subprocess speaking MCP over stdin/stdout."""

    kind: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None


class OAuthClientSpec(_Model):
    """How the hub authorizes itself to a remote server with OAuth 2.1 (the MCP authorization spec).

    Nothing here is needed for a server offering dynamic client registration: ``hanzo-hub auth login NAME`` works for
    any remote server. Set ``client_id`` (and ``client_secret``, ``redirect_port``) for a client registered by hand.
    """

    client_id: str | None = Field(default=None, min_length=1, description="A pre-registered client (default: DCR).")
    client_secret: SecretStr | None = Field(default=None, description="Its secret; may be ${vault:NAME}.")
    scope: str | None = Field(default=None, description="Space-separated scopes (default: what the server asks).")
    redirect_port: int | None = Field(
        default=None, ge=1, le=65535, description="Loopback port of the login callback (default: any free port)."
    )
    client_name: str = "hanzo-hub"
    client_metadata_url: str | None = Field(
        default=None,
        pattern=r"^https://[^/]+/.+",
        description="The HTTPS URL of a Client ID Metadata Document you publish for the hub: used as its client_id "
        "where the authorization server supports such documents (SEP-991), instead of dynamic registration.",
    )


class _RemoteServerBase(_ServerBase):
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    oauth: OAuthClientSpec | None = Field(default=None, description="OAuth client settings; true: the defaults.")

    @field_validator("oauth", mode="before")
    @classmethod
    def _oauth_shorthand(cls, value: Any) -> Any:
        """``"oauth": true`` means the defaults, ``false`` none."""
        if value is True:
            return {}
        return None if value is False else value


class HttpServerSpec(_RemoteServerBase):
    """A remote server speaking streamable HTTP."""

    kind: Literal["http"] = "http"


class SseServerSpec(_RemoteServerBase):
    """A remote server speaking the legacy HTTP+SSE transport."""

    kind: Literal["sse"] = "sse"


class InprocServerSpec(_ServerBase):
    """A server object living in the hub's process: ``module:attribute`` names an MCP server or a factory."""

    kind: Literal["inproc"] = "inproc"
    target: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


ServerSpec = Annotated[StdioServerSpec | HttpServerSpec | SseServerSpec | InprocServerSpec, Field(discriminator="kind")]

_TYPE_TO_KIND = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "sse"}


def normalize_server_entry(entry: Any) -> Any:
    """Turn a Claude Desktop / Claude Code / Cursor / VS Code server entry into a kind-tagged spec dict.

    Raises:
        ValueError: the entry says neither how to launch nor where to reach the server.
    """
    if not isinstance(entry, dict) or "kind" in entry:
        return entry
    data = dict(entry)
    declared = data.pop("type", None)
    if declared is not None:
        if declared not in _TYPE_TO_KIND:
            raise ValueError(f"unknown server type {declared!r}; expected one of {sorted(_TYPE_TO_KIND)}")
        data["kind"] = _TYPE_TO_KIND[declared]
    elif "command" in data:
        data["kind"] = "stdio"
    elif "url" in data:
        data["kind"] = "http"
    elif "target" in data:
        data["kind"] = "inproc"
    else:
        raise ValueError("a server needs 'command' (stdio), 'url' (http/sse) or 'target' (in-process)")
    return data
