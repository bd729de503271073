"""First-party MCP server `data` (see servers/README.md)."""
