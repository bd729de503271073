"""Secrets encrypted at rest (Fernet), a key from the OS keyring or a 0600 key file, and a ``Redactor``.

Layout under the vault directory (``HubSettings.vault_dir``): ``secrets.json`` maps each name to a Fernet token;
``vault.key`` holds the key when no keyring backend is available (created 0600, refused if group/other can read
it). Values are injected into a server's environment or headers at launch by the hub and never pass through tool
arguments or results; ``Redactor`` replaces any that appear in text with ``[redacted:NAME]``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import re
import stat
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from cryptography.fernet import Fernet, InvalidToken
from mcp.shared.dispatcher import ProgressFnT
from pydantic import BaseModel

from hanzo_hub.errors import VaultError

__all__ = [
    "KEYRING_USER",
    "MIN_REDACT_LENGTH",
    "SECRET_REF",
    "RedactingFilter",
    "Redactor",
    "Vault",
    "expand_secrets",
    "redacted_data",
    "redacted_logs",
    "redacted_model",
    "redacted_progress",
]

logger = logging.getLogger(__name__)

KEYRING_USER = "vault-key"
MIN_REDACT_LENGTH = 4
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
SECRET_REF = re.compile(r"\$\{vault:([A-Za-z_][A-Za-z0-9_.-]{0,127})\}")
"""``${vault:NAME}`` in a server's ``env`` value or header: replaced by the secret at launch."""


def expand_secrets(value: str, secrets: Mapping[str, str]) -> str:
    """``value`` with every ``${vault:NAME}`` replaced by the secret ``NAME``.

    Raises:
        VaultError: a referenced secret is not in the vault (the message names it, never a value).
    """
    if "${vault:" not in value:
        return value

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in secrets:
            raise VaultError(f"secret {name!r} is not in the vault (hanzo-hub secrets set {name})")
        return secrets[name]

    return SECRET_REF.sub(one, value)


def _keyring_get(service: str) -> tuple[object | None, str | None]:
    """The keyring module (when a real backend exists) and the stored key, if any."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return None, None
    backend = keyring.get_keyring()
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None, None
    try:
        return keyring, keyring.get_password(service, KEYRING_USER)
    except Exception:  # keyring backends raise their own error types; any failure means "no keyring"
        logger.warning("OS keyring unavailable; using the key file")
        return None, None


class Vault:
    """Encrypted name → value store.

    Args:
        directory: where ``secrets.json`` (and ``vault.key`` without a keyring) live; created 0700.
        keyring_service: the OS keyring service name, or ``None`` to always use the key file.

    Raises:
        VaultError: the key file is readable by others, or the key cannot be read or stored.
    """

    def __init__(self, directory: Path, *, keyring_service: str | None = "hanzo-hub") -> None:
        self.directory = directory
        self.file = directory / "secrets.json"
        self.key_file = directory / "vault.key"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.key_source = "file"
        self._fernet = Fernet(self._load_key(keyring_service))

    def _load_key(self, service: str | None) -> bytes:
        if service is not None and not self.key_file.exists():
            module, stored = _keyring_get(service)
            if module is not None:
                self.key_source = "keyring"
                if stored is None:
                    stored = Fernet.generate_key().decode()
                    module.set_password(service, KEYRING_USER, stored)  # type: ignore[attr-defined]
                return stored.encode()
        return self._key_from_file()

    def _key_from_file(self) -> bytes:
        try:
            fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            mode = self.key_file.stat().st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise VaultError(f"{self.key_file} is accessible by group or others; chmod 600 it") from None
            return self.key_file.read_bytes().strip()
        except OSError as exc:
            raise VaultError(f"cannot create {self.key_file}: {exc.strerror}") from exc
        key = Fernet.generate_key()
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        return key

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.file.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as exc:
            raise VaultError(f"{self.file} is unreadable or corrupt") from exc
        if not isinstance(data, dict):
            raise VaultError(f"{self.file} is corrupt")
        return {str(k): str(v) for k, v in data.items()}

    def _write(self, data: Mapping[str, str]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".secrets-")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(dict(sorted(data.items())), handle)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.file)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise VaultError(f"cannot write {self.file}: {exc.strerror}") from exc

    def set(self, name: str, value: str) -> None:
        """Store (or replace) a secret.

        Raises:
            VaultError: bad name or unwritable vault.
        """
        if not NAME_PATTERN.match(name):
            raise VaultError(f"secret name {name!r} must be letters, digits, '_', '.', '-' (at most 128)")
        token = self._fernet.encrypt(value.encode()).decode()
        with self._locked():
            data = self._read()
            data[name] = token
            self._write(data)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock on the vault for one read-modify-write, so a hub refreshing OAuth tokens and a
        ``secrets set`` on the command line never lose each other's change (``flock`` on ``vault.lock``)."""
        try:
            fd = os.open(self.directory / "vault.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise VaultError(f"cannot lock {self.directory}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def get(self, name: str) -> str | None:
        """The secret's value, or ``None`` if unknown.

        Raises:
            VaultError: the stored token does not decrypt with this key.
        """
        token = self._read().get(name)
        if token is None:
            return None
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise VaultError(f"secret {name!r} does not decrypt with this vault's key") from exc

    def list(self) -> list[str]:
        """The names of the stored secrets (never their values)."""
        return sorted(self._read())

    def delete(self, name: str) -> bool:
        """Remove a secret; whether it existed."""
        with self._locked():
            data = self._read()
            if data.pop(name, None) is None:
                return False
            self._write(data)
        return True

    def values(self) -> dict[str, str]:
        """Every name and value, for injection at launch and for a ``Redactor``."""
        return {name: value for name in self.list() if (value := self.get(name)) is not None}

    def redactor(self) -> Redactor:
        """A ``Redactor`` for the secrets stored now."""
        return Redactor(self.values())


class Redactor:
    """Replaces every occurrence of a secret value (plain, URL-encoded or base64) with ``[redacted:NAME]``."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self._names: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None
        self._learn(secrets)

    def _learn(self, secrets: Mapping[str, str]) -> None:
        forms = dict(self._names)
        for name, value in secrets.items():
            if len(value) < MIN_REDACT_LENGTH:
                continue
            for form in (value, urllib.parse.quote(value, safe=""), base64.b64encode(value.encode()).decode()):
                forms.setdefault(form, name)
        ordered = sorted(forms, key=len, reverse=True)
        pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._names, self._pattern = forms, pattern  # swapped together: a redact running now sees old or new

    @property
    def empty(self) -> bool:
        """Whether there is nothing to redact yet (``redact`` returns every text unchanged)."""
        return self._pattern is None

    def add(self, name: str, value: str) -> None:
        """Redact ``value`` too from now on (an OAuth token the hub obtained while serving); every holder of
        :meth:`redact` sees it."""
        if value not in self._names:
            self._learn({name: value})

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced."""
        pattern, names = self._pattern, self._names
        if pattern is None:
            return text
        return pattern.sub(lambda m: f"[redacted:{names[m.group(0)]}]", text)


def redacted_data(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON data) with ``redact`` applied to every string in it, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): redacted_data(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted_data(v, redact) for v in value]
    return value


M = TypeVar("M", bound=BaseModel)


def redacted_model(model: M, redact: Callable[[str], str] | None) -> M:
    """``model`` (a protocol message) with every string in it redacted; the same object when nothing changed."""
    if redact is None:
        return model
    data = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    clean = redacted_data(data, redact)
    return model if clean == data else type(model).model_validate(clean)


def redacted_progress(callback: ProgressFnT, redact: Callable[[str], str]) -> ProgressFnT:
    """``callback`` receiving progress messages with ``redact`` applied."""

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await callback(progress, total, redact(message) if message is not None else None)

    return relay


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from each record's final message."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the message, redact it, and drop the arguments."""
        record.msg = self.redactor.redact(record.getMessage())
        record.args = None
        return True


@contextlib.contextmanager
def redacted_logs(redactor: Redactor | None) -> Iterator[None]:
    """While open, every handler of the root logger redacts ``redactor``'s secrets from what it emits.

    A filter on the handlers (not on a logger) sees the records of every logger that propagates to them, the
    SDK's and the libraries' included. ``None`` (an empty vault) changes nothing.
    """
    if redactor is None:
        yield
        return
    redacting = RedactingFilter(redactor)
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(redacting)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(redacting)
