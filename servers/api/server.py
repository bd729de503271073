"""The ``api`` MCP server: HTTP requests, OpenAPI, GraphQL, gRPC, JSON utilities, JWT/OAuth2 and webhooks.

Each concept registers its tools from its own module onto the one ``mcp`` below.
"""

from __future__ import annotations

from mcp.server import MCPServer

from servers.api import auth_tools, graphql_tools, grpc_tools, http_tools, json_tools, openapi_tools, webhook_tools

mcp = MCPServer(
    "api",
    instructions="Work with web APIs: send HTTP requests, explore and call OpenAPI, GraphQL and gRPC services, "
    "query and validate JSON, handle JWT/OAuth2 tokens and webhook signatures. URLs are governed by the hub's "
    "network policy (loopback by default).",
)

for module in (http_tools, openapi_tools, graphql_tools, grpc_tools, json_tools, auth_tools, webhook_tools):
    module.register(mcp)
