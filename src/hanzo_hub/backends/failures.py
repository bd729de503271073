"""What a failed connection attempt to a downstream server says: the words the supervisor logs and reports."""

from __future__ import annotations

import mcp_types as types
from mcp import MCPError

from hanzo_hub.errors import AuthorizationRequired, SandboxError

__all__ = ["describe_failure", "innermost", "needs_login"]


def innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (task groups nest a connection's real error); ``exc`` itself otherwise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_failure(exc: BaseException, *, started: bool) -> str:
    """Why a connection attempt failed, in words (the innermost error of a group)."""
    leaf = innermost(exc)
    if isinstance(leaf, TimeoutError):
        return "did not complete its handshake in time" if not started else "timed out"
    if isinstance(leaf, FileNotFoundError):
        return f"cannot be launched: command not found ({leaf.filename or leaf})"
    if isinstance(leaf, PermissionError):
        return f"cannot be launched: permission denied ({leaf.filename or leaf})"
    if isinstance(leaf, MCPError) and leaf.code == types.CONNECTION_CLOSED:
        return "exited during the handshake" if not started else "closed its connection"
    if isinstance(leaf, MCPError):
        return f"answered the handshake with an error: {leaf.error.message}"
    if isinstance(leaf, SandboxError):
        return f"cannot be launched: {leaf}"
    if isinstance(leaf, AuthorizationRequired):
        return f"is not authorized ({leaf})"
    return f"failed: {type(leaf).__name__}: {leaf}"


def needs_login(exc: BaseException) -> bool:
    """Whether a connection attempt failed because the server wants an OAuth login the hub does not hold."""
    return isinstance(innermost(exc), AuthorizationRequired)
