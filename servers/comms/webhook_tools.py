"""Chat webhooks (Slack, Discord, generic JSON), Apprise notifications and a view of what is configured.

Webhook URLs carry their token in the path, so they come from the environment (``COMMS_SLACK_WEBHOOK_URL``,
``COMMS_DISCORD_WEBHOOK_URL``, ``COMMS_WEBHOOKS``, ``COMMS_NOTIFY_URLS``) and never appear in results or errors:
a target is shown as its scheme and host only.
"""

from __future__ import annotations

import urllib.parse
import warnings
from typing import Annotated, Any, Literal

import httpx2
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field, SecretStr

from servers._common import ToolError, json_result, table_result
from servers.comms._settings import CommsSettings, settings, tls_context
from servers.comms.server import mcp

POST = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
MAX_RESPONSE_CHARS = 4000
Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[\w.-]+$", description="configured target name")]


def _where(url: str) -> str:
    """Scheme and host of a URL: safe to show (the token lives in the path or query)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"


def _url(secret: SecretStr | None, variable: str, what: str) -> str:
    if secret is None or not secret.get_secret_value():
        raise ToolError(f"{what} is not configured: set {variable} in the hub's vault")
    return secret.get_secret_value()


def _post(
    url: str, payload: dict[str, Any], config: CommsSettings, params: dict[str, str] | None = None
) -> httpx2.Response:
    try:
        with httpx2.Client(timeout=config.timeout_seconds, verify=tls_context(config)) as client:
            response = client.post(url, json=payload, params=params)
    except httpx2.HTTPError as exc:
        raise ToolError(f"posting to {_where(url)} failed: {type(exc).__name__}") from None
    if response.status_code >= 400:
        body = response.text[:500]
        raise ToolError(f"{_where(url)} answered HTTP {response.status_code}: {body}")
    return response


@mcp.tool(
    description="Post a message to the configured Slack incoming webhook (COMMS_SLACK_WEBHOOK_URL): mrkdwn text, "
    "optionally with Block Kit blocks. Returns the HTTP status and Slack's answer.",
    annotations=POST,
)
def slack_webhook_post(
    text: Annotated[str, Field(min_length=1, max_length=40_000, description="message (Slack mrkdwn)")],
    blocks: Annotated[list[dict[str, Any]] | None, Field(max_length=50, description="Block Kit blocks")] = None,
) -> CallToolResult:
    config = settings()
    url = _url(config.slack_webhook_url, "COMMS_SLACK_WEBHOOK_URL", "the Slack webhook")
    payload: dict[str, Any] = {"text": text} | ({"blocks": blocks} if blocks else {})
    response = _post(url, payload, config)
    return json_result({"status": response.status_code, "answer": response.text[:MAX_RESPONSE_CHARS]})


class Embed(BaseModel):
    """A Discord embed (a card under the message)."""

    title: str | None = Field(default=None, max_length=256)
    description: str | None = Field(default=None, max_length=4096)
    url: str | None = Field(default=None, pattern=r"^https?://", max_length=2048)
    color: int | None = Field(default=None, ge=0, le=0xFFFFFF, description="RGB as an integer")


@mcp.tool(
    description="Post a message to the configured Discord webhook (COMMS_DISCORD_WEBHOOK_URL) with an optional "
    "display name and embeds (title, description, link, colour). Waits for Discord to confirm and returns the "
    "created message id.",
    annotations=POST,
)
def discord_webhook_post(
    content: Annotated[str, Field(min_length=1, max_length=2000, description="message text (Discord markdown)")],
    username: Annotated[str | None, Field(min_length=1, max_length=80, description="override the bot name")] = None,
    embeds: Annotated[list[Embed] | None, Field(max_length=10, description="cards under the message")] = None,
) -> CallToolResult:
    config = settings()
    url = _url(config.discord_webhook_url, "COMMS_DISCORD_WEBHOOK_URL", "the Discord webhook")
    payload: dict[str, Any] = {"content": content, "allowed_mentions": {"parse": []}}
    if username:
        payload["username"] = username
    if embeds:
        payload["embeds"] = [e.model_dump(exclude_none=True) for e in embeds]
    response = _post(url, payload, config, params={"wait": "true"})
    try:
        message_id = response.json().get("id") if response.content else None
    except ValueError:
        message_id = None
    return json_result({"status": response.status_code, "messageId": message_id})


@mcp.tool(
    description="POST a JSON document to one of the named generic webhooks configured in COMMS_WEBHOOKS (CI "
    "triggers, automation hooks, incident tools). Returns the HTTP status and the response body (JSON when it is).",
    annotations=POST,
)
def webhook_post(
    target: Name,
    payload: Annotated[dict[str, Any], Field(description="the JSON body to send")],
) -> CallToolResult:
    config = settings()
    secret = config.webhooks.get(target)
    if secret is None:
        raise ToolError(
            f"no webhook named {target!r}; configured: {sorted(config.webhooks) or 'none'} (COMMS_WEBHOOKS)"
        )
    response = _post(secret.get_secret_value(), payload, config)
    try:
        answer: Any = response.json()
    except ValueError:
        answer = response.text[:MAX_RESPONSE_CHARS]
    return json_result({"target": target, "status": response.status_code, "answer": answer})


@mcp.tool(
    description="Send a notification through Apprise to configured targets (COMMS_NOTIFY_URLS maps names to "
    "Apprise URLs: email, chat apps, push services, JSON endpoints...). Sends to all targets unless some are named. "
    "Returns which targets were notified.",
    annotations=POST,
)
def notify(
    body: Annotated[str, Field(min_length=1, max_length=32_000, description="notification text")],
    title: Annotated[str | None, Field(max_length=250, description="title")] = None,
    kind: Annotated[Literal["info", "success", "warning", "failure"], Field(description="severity")] = "info",
    targets: Annotated[list[Name] | None, Field(max_length=50, description="target names; all when omitted")] = None,
) -> CallToolResult:
    import apprise  # heavy (its plugin registry): imported when a notification is sent

    config = settings()
    chosen = targets or sorted(config.notify_urls)
    if not chosen:
        raise ToolError("no notification targets are configured: set COMMS_NOTIFY_URLS in the hub's vault")
    unknown = sorted(set(chosen) - set(config.notify_urls))
    if unknown:
        raise ToolError(f"unknown targets {unknown}; configured: {sorted(config.notify_urls)}")
    results = {}
    with warnings.catch_warnings():  # its plugins import the deprecated stdlib imghdr (Python < 3.13)
        warnings.filterwarnings("ignore", message=".*imghdr", category=DeprecationWarning)
        for name in chosen:
            sender = apprise.Apprise()
            if not sender.add(config.notify_urls[name].get_secret_value()):
                raise ToolError(f"target {name!r} is not a valid Apprise URL")
            results[name] = bool(sender.notify(body=body, title=title or "", notify_type=kind))
    failed = sorted(n for n, sent in results.items() if not sent)
    if failed and len(failed) == len(results):
        raise ToolError(f"no target accepted the notification: {failed}")
    return json_result({"notified": sorted(n for n, sent in results.items() if sent), "failed": failed})


@mcp.tool(
    description="Show which channels this server can use (SMTP, IMAP, MQTT, IRC, Slack, Discord, generic webhooks, "
    "Apprise targets) and where they point (host and port; never passwords or tokens). Use it first to see what is "
    "set up.",
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
def comms_channels() -> CallToolResult:
    c = settings()

    def server(host: str | None, port: int, extra: str) -> str | None:
        return f"{host}:{port} ({extra})" if host else None

    rows = [
        ["email_send", server(c.smtp_host, c.smtp_port, c.smtp_security)],
        ["email (IMAP)", server(c.imap_host, c.imap_port, c.imap_security)],
        ["mqtt", server(c.mqtt_host, c.mqtt_port, "tls" if c.mqtt_tls else "plain")],
        ["irc", server(c.irc_host, c.irc_port, f"nick {c.irc_nick}")],
        ["slack_webhook_post", _where(c.slack_webhook_url.get_secret_value()) if c.slack_webhook_url else None],
        ["discord_webhook_post", _where(c.discord_webhook_url.get_secret_value()) if c.discord_webhook_url else None],
    ]
    rows += [[f"webhook_post:{n}", _where(u.get_secret_value())] for n, u in sorted(c.webhooks.items())]
    rows += [
        [f"notify:{n}", urllib.parse.urlsplit(u.get_secret_value()).scheme + "://"]
        for n, u in sorted(c.notify_urls.items())
    ]
    return table_result(["channel", "target"], [[n, t or "not configured"] for n, t in rows])
