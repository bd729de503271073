"""The ``comms`` MCP server: one ``MCPServer`` with the email, MQTT, IRC and webhook tools registered onto it."""

from __future__ import annotations

from mcp.server import MCPServer

mcp = MCPServer(
    "comms",
    title="Communication",
    description="Email (SMTP send, IMAP read), MQTT, IRC, Slack/Discord/JSON webhooks and Apprise notifications.",
    instructions=(
        "Send and read messages over the channels the hub configured (see comms_channels). Servers, logins and "
        "webhook URLs come from the environment the hub injects; tools never take passwords or tokens."
    ),
)

# Importing a module registers its tools onto ``mcp``.
from servers.comms import email_tools, irc_tools, mqtt_tools, webhook_tools  # noqa: E402

__all__ = ["email_tools", "irc_tools", "mcp", "mqtt_tools", "webhook_tools"]
