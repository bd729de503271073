"""hanzo-hub: one MCP server in front of many MCP tool servers."""

__version__ = "0.1.0"

__all__ = ("__version__",)
