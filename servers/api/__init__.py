"""First-party ``api`` server: HTTP, OpenAPI, GraphQL, gRPC, JSON utilities, JWT/OAuth2 and webhooks."""
