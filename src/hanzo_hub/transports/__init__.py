"""Serving the hub to clients: stdio and streamable HTTP."""
