"""Downstream MCP connections: one module per transport, supervised by the pool."""
