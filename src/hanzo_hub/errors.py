"""The hub's one error tree.

```
HubError
├── ConfigError
├── CatalogError ── ManifestInvalid, InstallFailed
├── BackendError ── BackendUnavailable, BackendTimeout, BackendCrashed
├── ToolNotFound, ResourceNotFound, PromptNotFound
├── PolicyDenied
├── EmbeddingError, VectorStoreError, MemoryStoreError
└── CompletionError ── ModelNotFound, NoEligibleModel, ProviderError, BudgetExceeded, RateLimited
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


class BackendNeedsLogin(BackendError):
    """The server refused a request for want of an OAuth login the hub lacks (more scopes); its connection goes on."""


class BackendInvalidAnswer(BackendError):
    """The server answered a request with a result that breaks the protocol (its connection goes on)."""


class AuthorizationRequired(HubError):
    """A remote server wants OAuth authorization the hub does not hold, or can no longer refresh; the message names
    the server and the command that grants it (``hanzo-hub auth login NAME``)."""


class AuthorizationFailed(HubError):
    """An interactive OAuth login did not complete: the user denied it, the callback never came, or the
    authorization server refused the exchange; the message says which."""


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


class UnknownRequest(CompletionError):
    """No routed request of that id is known for the caller (never made, another user's, or too old to keep)."""


class AlreadyRated(CompletionError):
    """The routed answer was rated already; it takes one rating."""


class ModelNotFound(CompletionError):
    """No model of that id is in the registry."""


class NoEligibleModel(CompletionError):
    """Every configured model violates the request's cost, latency, context or capability limits."""


class ProviderError(CompletionError):
    """A provider call failed. ``retryable`` says whether trying again may succeed; ``retry_after`` is the wait in
    seconds the provider asked for (``Retry-After``), ``status`` the HTTP status (``None``: no response)."""

    def __init__(
        self,
        provider: str,
        reason: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"provider '{provider}': {reason}")
        self.provider = provider
        self.reason = reason
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class BudgetExceeded(CompletionError):
    """The request could cost more than a budget has left; refused before anything was spent.

    ``scope`` is ``user:<id>`` or ``project:<id>``, ``period`` one of ``day``, ``month``, ``total``.
    """

    def __init__(self, scope: str, period: str, *, limit: str, spent: str, estimate: str) -> None:
        super().__init__(
            f"{scope} budget ({period}) of ${limit} has ${spent} spent; this request could cost up to ${estimate}"
        )
        self.scope = scope
        self.period = period
        self.limit = limit
        self.spent = spent
        self.estimate = estimate


class RateLimited(CompletionError):
    """The caller sent more requests (or tokens) than its rate limit allows; ``retry_after`` seconds to wait."""

    def __init__(self, user: str, what: str, retry_after: float) -> None:
        super().__init__(f"user '{user}' is over the {what} rate limit; retry in {retry_after:.1f}s")
        self.user = user
        self.what = what
        self.retry_after = retry_after


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
