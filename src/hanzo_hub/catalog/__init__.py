"""The catalog: manifests of downstream servers and configs imported from other MCP clients."""
