"""Where the comms server connects and with which credentials: environment variables injected by the hub at launch.

Every variable starts with ``COMMS_`` (``COMMS_SMTP_HOST``, ``COMMS_IMAP_PASSWORD``, ``COMMS_WEBHOOKS``...). The hub's
vault supplies the secret ones; no tool takes a password or a tokenised URL as an argument. Settings are read per
call, so a relaunch with new values is not needed for a test that changes them.
"""

from __future__ import annotations

import ssl
from typing import Literal

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from servers._common import ToolError

Security = Literal["none", "starttls", "ssl"]


class CommsSettings(BaseSettings):
    """The ``COMMS_*`` environment of the server."""

    model_config = SettingsConfigDict(env_prefix="COMMS_", extra="ignore", frozen=True)

    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_security: Security = "starttls"
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_from: str | None = None

    imap_host: str | None = None
    imap_port: int = 993
    imap_security: Security = "ssl"
    imap_username: str | None = None
    imap_password: SecretStr | None = None

    mqtt_host: str | None = None
    mqtt_port: int = 1883
    mqtt_tls: bool = False
    mqtt_username: str | None = None
    mqtt_password: SecretStr | None = None

    irc_host: str | None = None
    irc_port: int = 6667
    irc_tls: bool = False
    irc_nick: str = "hanzo-bot"
    irc_password: SecretStr | None = None

    slack_webhook_url: SecretStr | None = None
    discord_webhook_url: SecretStr | None = None
    webhooks: dict[str, SecretStr] = {}
    """Named generic JSON webhooks, ``COMMS_WEBHOOKS='{"ci": "https://..."}'``."""
    notify_urls: dict[str, SecretStr] = {}
    """Named Apprise targets, ``COMMS_NOTIFY_URLS='{"ops": "json://...", "mail": "mailtos://..."}'``."""

    tls_ca_file: str | None = None
    """A CA bundle to trust for TLS (a private mail server); the system store otherwise."""
    timeout_seconds: float = 20.0


def settings() -> CommsSettings:
    """The current settings (a malformed variable is a tool error naming it)."""
    try:
        return CommsSettings()
    except ValueError as exc:
        raise ToolError(f"bad COMMS_* environment: {exc}") from exc


def require(value: str | None, variable: str, what: str) -> str:
    """``value``, or a tool error saying which variable the hub must set."""
    if not value:
        raise ToolError(f"{what} is not configured: set {variable} in the hub's vault or the server's environment")
    return value


def tls_context(config: CommsSettings) -> ssl.SSLContext:
    """A verifying TLS context (trusting ``COMMS_TLS_CA_FILE`` when set)."""
    return ssl.create_default_context(cafile=config.tls_ca_file)
