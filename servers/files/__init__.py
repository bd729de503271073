"""First-party MCP server `files` (see servers/README.md)."""
