"""First-party MCP server ``comms``: email (SMTP, IMAP), MQTT, IRC, chat webhooks and Apprise notifications."""
