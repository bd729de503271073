"""First-party MCP servers shipped with hanzo-hub (``python -m servers.<id>``).

Each server is a thin :class:`mcp.server.MCPServer` layer over a well-kept library, with a manifest in
``src/hanzo_hub/catalog/manifests/<id>/`` (``origin: first-party``, launched as ``{python} -m servers.<id>``).
Shared conventions live in :mod:`servers._common`; see ``servers/README.md``.
"""
