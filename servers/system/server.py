"""The ``system`` MCP server: one ``MCPServer`` with the host, process, network and file tools registered on it."""

from __future__ import annotations

from mcp.server import MCPServer

from servers.system import files, host, network, probes, processes

__all__ = ["mcp"]

mcp = MCPServer(
    "system",
    title="System",
    version="0.1.0",
    description="Inspect the local machine: host, CPU, memory, disks, processes, network, DNS and service health.",
    instructions=(
        "Read-only views of this machine (psutil), plus checks of local services (TCP ports, DNS, HTTP) and a kill "
        "tool limited to the server's own user. Files are readable only under the allowed roots."
    ),
)
for module in (host, processes, network, probes, files):
    module.register(mcp)
