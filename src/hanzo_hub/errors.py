"""The hub's one error tree.

```
HubError
├── ConfigError
├── CatalogError ── ManifestInvalid, InstallFailed
├── BackendError ── BackendUnavailable, BackendTimeout, BackendCrashed
├── ToolNotFound, ResourceNotFound, PromptNotFound
├── PolicyDenied
├── EmbeddingError, VectorStoreError, MemoryStoreError
└── CompletionError ── ModelNotFound, NoEligibleModel
```

Adapters translate foreign exceptions into these (``raise ... from exc``); the front server converts them into
MCP results or protocol errors in one place (``hub/server.py``).
"""

from __future__ import annotations


class HubError(Exception):
    """Base of every error the hub raises on purpose."""


class ConfigError(HubError):
    """A configuration file, variable or flag is invalid; the message names where and why."""


class CatalogError(HubError):
    """The catalog could not be read."""


class ManifestInvalid(CatalogError):
    """One manifest is broken; it is skipped and the rest of the catalog loads. ``path`` and ``key`` say where."""

    def __init__(self, path: str, key: str, reason: str) -> None:
        super().__init__(f"{path}: {key}: {reason}")
        self.path = path
        self.key = key
        self.reason = reason


class InstallFailed(CatalogError):
    """A cataloged server's environment could not be built; ``server`` names it, the message says why."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"catalog server '{server}': {reason}")
        self.server = server
        self.reason = reason


class BackendError(HubError):
    """A downstream server failed. ``server`` names it."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"server '{server}' {reason}")
        self.server = server
        self.reason = reason


class BackendUnavailable(BackendError):
    """The server could not be started or connected, or its circuit breaker is open."""


class BackendTimeout(BackendError):
    """The server did not answer within its deadline."""


class BackendCrashed(BackendError):
    """The server's connection ended while a request was in flight."""


class ToolNotFound(HubError):
    """No tool of that exposed name exists."""


class ResourceNotFound(HubError):
    """No resource of that URI is known (answered as -32602 with ``data.uri``, per SEP-2164)."""

    def __init__(self, message: str, uri: str = "") -> None:
        super().__init__(message)
        self.uri = uri


class PromptNotFound(HubError):
    """No prompt of that exposed name exists."""


class PolicyDenied(HubError):
    """A policy refused the call."""


class EmbeddingError(HubError):
    """An embedding model could not be loaded or failed to embed."""


class VectorStoreError(HubError):
    """The vector store could not be opened, read or written."""


class CompletionError(HubError):
    """A routed completion could not be produced."""


class ModelNotFound(CompletionError):
    """No model of that id is in the registry."""


class NoEligibleModel(CompletionError):
    """Every configured model violates the request's cost, latency, context or capability limits."""


class SandboxError(HubError):
    """Isolation could not be provided as the policy asked."""


class SandboxUnavailable(SandboxError):
    """The machine lacks the sandbox backend a policy asks for; the message says why (e.g. not installed)."""


class SandboxStartFailed(SandboxError):
    """The sandbox backend exists but could not start the process or container."""


class VaultError(SandboxError):
    """The secrets vault cannot be read or written (bad key, wrong permissions, corrupt file)."""


class MemoryStoreError(HubError):
    """The memory store could not be opened, read or written (e.g. another process holds its lock)."""
