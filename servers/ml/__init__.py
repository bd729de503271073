"""First-party MCP server `ml` (see servers/README.md)."""
