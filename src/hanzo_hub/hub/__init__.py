"""The front MCP server: aggregation, naming and the protocol relay."""
