"""Network inventory tools: interfaces, connections, I/O counters, routes and a free port."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated, Any, Literal

import psutil
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.system._util import READ_ONLY, off_loop

__all__ = ["register"]

FAMILIES = {socket.AF_INET: "ipv4", socket.AF_INET6: "ipv6", psutil.AF_LINK: "link"}
ConnKind = Literal["inet", "inet4", "inet6", "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "unix", "all"]


def _interfaces() -> list[dict[str, Any]]:
    stats = psutil.net_if_stats()
    found = []
    for name, addrs in sorted(psutil.net_if_addrs().items()):
        st = stats.get(name)
        found.append(
            {
                "name": name,
                "up": st.isup if st else None,
                "mtu": st.mtu if st else None,
                "speed_mbps": st.speed if st else None,
                "addresses": [
                    {"family": FAMILIES.get(a.family, str(a.family)), "address": a.address, "netmask": a.netmask}
                    for a in addrs
                ],
            }
        )
    return found


def _addr(value: Any) -> str:
    if not value:
        return ""
    if isinstance(value, str):
        return value
    return f"{value.ip}:{value.port}"


def _connections(kind: ConnKind, status: str | None, port: int | None) -> list[list[Any]]:
    rows = []
    for c in psutil.net_connections(kind=kind):
        if status and c.status != status:
            continue
        local_port = getattr(c.laddr, "port", None)
        if port is not None and local_port != port and getattr(c.raddr, "port", None) != port:
            continue
        name = None
        if c.pid:
            try:
                name = psutil.Process(c.pid).name()
            except psutil.Error:
                name = None
        proto = "tcp" if c.type == socket.SOCK_STREAM else "udp" if c.type == socket.SOCK_DGRAM else str(c.type)
        rows.append([proto, _addr(c.laddr), _addr(c.raddr), c.status, c.pid, name])
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows


def _routes() -> list[list[Any]]:
    table = Path("/proc/net/route")
    if not table.is_file():
        raise ToolError("no /proc/net/route on this machine (routes are read from Linux procfs)")
    rows = []
    for line in table.read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) < 8:
            continue
        iface, dest, gateway, flags, metric, mask = parts[0], parts[1], parts[2], int(parts[3], 16), parts[6], parts[7]
        rows.append([_hex_ip(dest) + "/" + str(bin(int(mask, 16)).count("1")), _hex_ip(gateway), iface, int(metric),
                     bool(flags & 0x1), bool(flags & 0x2)])  # fmt: skip
    return rows


def _hex_ip(value: str) -> str:
    return socket.inet_ntoa(int(value, 16).to_bytes(4, "little"))


def _free_port(host: str, kind: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock_type = socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM
    with socket.socket(family, sock_type) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:
            raise ToolError(f"cannot bind on {host!r}: {exc.strerror}; use a local address such as 127.0.0.1") from exc
        port: int = sock.getsockname()[1]
        return port


def register(mcp: MCPServer) -> None:
    """Add the network inventory tools to ``mcp``."""

    @mcp.tool(annotations=READ_ONLY)
    async def net_interfaces() -> CallToolResult:
        """Network interfaces with their IPv4/IPv6/MAC addresses, netmasks, up/down state, MTU and link speed. Use it
        to find the machine's IP addresses or a down interface.
        """
        return json_result({"interfaces": await off_loop(_interfaces)})

    @mcp.tool(annotations=READ_ONLY)
    async def net_connections(
        kind: Annotated[ConnKind, Field(description="socket families/protocols to include")] = "inet",
        status: Annotated[
            str | None, Field(pattern=r"^[A-Z_0-9]+$", description="e.g. LISTEN or ESTABLISHED; NONE for UDP")
        ] = None,
        port: Annotated[
            int | None, Field(ge=1, le=65535, description="only sockets with this local/remote port")
        ] = None,
    ) -> CallToolResult:
        """Open sockets: protocol, local and remote address, TCP status, owning pid and process name. With
        status=LISTEN it answers "what is listening on which port"; with port=N "who uses port N".
        """
        try:
            rows = await off_loop(_connections, kind, status, port)
        except psutil.AccessDenied as exc:
            raise ToolError("not permitted to list connections on this system") from exc
        return table_result(["proto", "local", "remote", "status", "pid", "process"], rows, title="connections")

    @mcp.tool(annotations=READ_ONLY)
    async def net_io() -> CallToolResult:
        """Cumulative traffic counters per interface since boot: bytes/packets sent and received, errors, drops.
        Call twice to compute throughput.
        """
        counters = await off_loop(psutil.net_io_counters, pernic=True)
        rows = [
            [n, c.bytes_sent, c.bytes_recv, c.packets_sent, c.packets_recv, c.errin + c.errout, c.dropin + c.dropout]
            for n, c in sorted(counters.items())
        ]
        columns = ["interface", "bytes_sent", "bytes_recv", "packets_sent", "packets_recv", "errors", "drops"]
        return table_result(columns, rows, title="network I/O since boot")

    @mcp.tool(annotations=READ_ONLY)
    async def net_routes() -> CallToolResult:
        """The IPv4 routing table (destination/prefix, gateway, interface, metric, up, via-gateway). The row with
        destination 0.0.0.0/0 is the default route.
        """
        rows = await off_loop(_routes)
        return table_result(["destination", "gateway", "interface", "metric", "up", "gateway_route"], rows)

    @mcp.tool(
        annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=False, openWorldHint=False)
    )
    async def port_find_free(
        host: Annotated[str, Field(min_length=1, description="local address to bind")] = "127.0.0.1",
        protocol: Literal["tcp", "udp"] = "tcp",
    ) -> CallToolResult:
        """Ask the OS for a currently unused port on a local address (bind to port 0, then release it). Use it to
        pick a port before starting a dev server or test service.
        """
        return json_result({"host": host, "protocol": protocol, "port": await off_loop(_free_port, host, protocol)})
