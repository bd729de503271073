"""A downstream server's failures: what a failed connection attempt says (the words the supervisor logs and
reports), and the backoff and circuit breaker that consecutive failures drive."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import mcp_types as types
from mcp import MCPError
from pydantic import ValidationError

from hanzo_hub.backends.oauth import LOGIN_NEEDED
from hanzo_hub.config import BackendSettings
from hanzo_hub.errors import (
    AuthorizationRequired,
    BackendError,
    BackendInvalidAnswer,
    BackendNeedsLogin,
    BackendUnavailable,
    SandboxError,
)

__all__ = ["Backoff", "StderrTail", "describe_failure", "innermost", "invalid_answer", "login_refusal", "needs_login"]

LOG_TAIL_LINES = 3

logger = logging.getLogger(__name__)


class StderrTail:
    """The last lines a stdio server wrote to its stderr log during its current run, quoted in error messages."""

    def __init__(self, path: Path, *, enabled: bool) -> None:
        self._path = path
        self._enabled = enabled
        self._offset = 0

    def mark(self) -> None:
        """A new run begins: quote only what it writes."""
        self._offset = self._size()

    def hint(self) -> str:
        """``"; stderr: a | b | c"``, or ``""`` when there is nothing to quote."""
        if not self._enabled:
            return ""
        try:
            with self._path.open("rb") as fh:
                size = self._size()
                start = self._offset if self._offset <= size else 0  # rotated since this run began
                fh.seek(max(start, size - 4096))
                tail = fh.read().decode("utf-8", "replace").strip().splitlines()[-LOG_TAIL_LINES:]
        except OSError:
            return ""
        return f"; stderr: {' | '.join(line.strip()[:200] for line in tail)}" if tail else ""

    def _size(self) -> int:
        try:
            return self._path.stat().st_size
        except OSError:
            return 0


@dataclass
class Backoff:
    """Consecutive failures of one server, when it may start again, and whether its circuit is open.

    Below ``breaker_threshold`` failures the wait before the next start doubles from ``restart_backoff`` up to
    ``restart_backoff_max``; at the threshold the circuit opens for ``breaker_cooldown`` and requests fail fast.
    """

    name: str
    settings: BackendSettings
    clock: Callable[[], float]
    failures: int = 0
    last_error: str | None = None
    next_start: float = 0.0

    def succeeded(self) -> None:
        """A request went through: the failures in a row are over (the last error stays, for reports)."""
        self.failures = 0

    def forgive(self) -> None:
        """Forget past failures (their cause was fixed): the next request may start the server at once."""
        self.failures, self.next_start = 0, 0.0

    def record(self, reason: str) -> None:
        """One more failure: the next start waits longer, or the circuit opens."""
        self.failures += 1
        self.last_error = reason
        if self.failures >= self.settings.breaker_threshold:
            delay = self.settings.breaker_cooldown
        else:
            delay = min(self.settings.restart_backoff * 2 ** (self.failures - 1), self.settings.restart_backoff_max)
        self.next_start = self.clock() + delay
        logger.warning("server %s failed (%d in a row): %s", self.name, self.failures, reason)

    def wait(self) -> float:
        """Seconds until the server may start again (0 when it may start now)."""
        return max(0.0, self.next_start - self.clock())

    def retry_in(self) -> float:
        """Like :meth:`wait`, but 0 while nothing has failed (for reports)."""
        return self.wait() if self.failures else 0.0

    def circuit_open(self) -> bool:
        """Whether requests fail fast now."""
        return self.failures >= self.settings.breaker_threshold and self.wait() > 0

    def check(self) -> None:
        """Fail fast while the circuit is open.

        Raises:
            BackendUnavailable: the circuit is open; the message says for how long and why.
        """
        if self.circuit_open():
            raise BackendUnavailable(
                self.name,
                f"is unavailable after {self.failures} consecutive failures (retry in {self.wait():.0f} s): "
                f"{self.last_error}",
            )


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
    if isinstance(leaf, BackendError):  # the hub's own account of what went wrong (e.g. ``sse_posts``)
        return leaf.reason
    return f"failed: {type(leaf).__name__}: {leaf}"


def invalid_answer(server: str, exc: ValidationError) -> BackendInvalidAnswer:
    """The error for a result of ``server`` that does not validate: the model and its first broken field."""
    first = exc.errors()[0] if exc.error_count() else None
    where = ".".join(str(part) for part in first["loc"]) if first else ""
    detail = f": {where}: {first['msg']}" if first else ""
    return BackendInvalidAnswer(server, f"answered with an invalid {exc.title}{detail}")


def login_refusal(server: str, exc: MCPError) -> BackendNeedsLogin | None:
    """The error for a request that ``server``'s connection answered for want of a login (a step-up answered in
    place, marked :data:`~hanzo_hub.backends.oauth.LOGIN_NEEDED`), else ``None``."""
    data = exc.error.data
    if isinstance(data, dict) and data.get("reason") == LOGIN_NEEDED:
        return BackendNeedsLogin(server, f"is not authorized ({exc.error.message})")
    return None


def needs_login(exc: BaseException) -> bool:
    """Whether a connection attempt failed because the server wants an OAuth login the hub does not hold."""
    return isinstance(innermost(exc), AuthorizationRequired)
