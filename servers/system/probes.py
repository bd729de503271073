"""Service checks: TCP ports and banners, DNS (direct queries and the system resolver) and HTTP health."""

from __future__ import annotations

import ipaddress
import socket
import time
from typing import Annotated, Any, Literal

import anyio
import dns.exception
import dns.rdatatype
import dns.resolver
import dns.reversename
import httpx2
from mcp.server import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result
from servers.system._util import READ_ONLY_OPEN, off_loop

__all__ = ["register"]

Host = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:\-\[\]_]+$", description="host")]
Port = Annotated[int, Field(ge=1, le=65535)]
Timeout = Annotated[float, Field(gt=0, le=30, description="seconds before giving up")]
RecordType = Literal["A", "AAAA", "CNAME", "MX", "TXT", "NS", "SOA", "SRV", "PTR", "CAA"]
BANNER_BYTES = 1024


def _resolver(nameserver: str | None, port: int, timeout: float) -> dns.resolver.Resolver:
    if nameserver is None:
        resolver = dns.resolver.Resolver()
    else:
        try:
            ipaddress.ip_address(nameserver)
        except ValueError as exc:
            raise ToolError(f"nameserver must be an IP address, got {nameserver!r}") from exc
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [nameserver]
    resolver.port = port
    resolver.lifetime = timeout
    resolver.timeout = timeout
    return resolver


def _query(resolver: dns.resolver.Resolver, name: str | dns.name.Name, rtype: str) -> dict[str, Any]:
    try:
        answer = resolver.resolve(name, rtype, search=False)
    except dns.resolver.NXDOMAIN as exc:
        raise ToolError(f"{name} does not exist (NXDOMAIN)") from exc
    except dns.resolver.NoAnswer:
        return {"name": str(name), "type": rtype, "records": [], "ttl": None}
    except dns.resolver.NoNameservers as exc:
        raise ToolError(f"every nameserver failed to answer for {name}: {exc}") from exc
    except dns.exception.Timeout as exc:
        raise ToolError(f"DNS query for {name} timed out; check the nameserver and port") from exc
    return {
        "name": str(name),
        "type": rtype,
        "records": [r.to_text() for r in answer],
        "ttl": answer.rrset.ttl if answer.rrset is not None else None,
        "nameserver": answer.nameserver,
    }


def _reverse(ip: str, nameserver: str | None, port: int, timeout: float) -> dict[str, Any]:
    try:
        name = dns.reversename.from_address(ip)
    except (dns.exception.SyntaxError, ValueError) as exc:
        raise ToolError(f"{ip!r} is not an IPv4 or IPv6 address") from exc
    found = _query(_resolver(nameserver, port, timeout), name, "PTR")
    return {"ip": ip, "ptr_name": str(name), "hostnames": found["records"], "ttl": found["ttl"]}


def _getaddrinfo(name: str) -> dict[str, Any]:
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise ToolError(f"cannot resolve {name!r}: {exc.strerror}") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    try:
        canonical = socket.gethostbyaddr(addresses[0])[0] if addresses else None
    except OSError:
        canonical = None
    return {"name": name, "addresses": addresses, "reverse_of_first": canonical}


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the probe tools to ``mcp``."""

    @mcp.tool(annotations=READ_ONLY_OPEN)
    async def port_check(host: Host, port: Port, timeout: Timeout = 2.0) -> CallToolResult:
        """Check whether a TCP port accepts connections (open / closed / timeout) and how long the connect took.
        Use it to see if a database, web server or other service is up.
        """
        started = time.perf_counter()
        state, detail = "open", None
        try:
            with anyio.fail_after(timeout):
                stream = await anyio.connect_tcp(host, port)
            await stream.aclose()
        except TimeoutError:
            state = "timeout"
        except OSError as exc:
            state, detail = "closed", str(exc)
        ms = round((time.perf_counter() - started) * 1000, 2)
        return json_result({"host": host, "port": port, "state": state, "elapsed_ms": ms, "detail": detail})

    @mcp.tool(annotations=READ_ONLY_OPEN)
    async def tcp_banner(
        host: Host,
        port: Port,
        send: Annotated[
            str | None, Field(max_length=1024, description="text to send first (e.g. 'HEAD / HTTP/1.0\\r\\n\\r\\n')")
        ] = None,
        timeout: Timeout = 2.0,
    ) -> CallToolResult:
        """Connect to a TCP port, optionally send a line, and return the first bytes the service answers (its
        banner: SSH version, SMTP greeting, Redis reply...). Use it to identify what runs on a port.
        """
        data = b""
        try:
            with anyio.fail_after(timeout):
                async with await anyio.connect_tcp(host, port) as stream:
                    if send:
                        await stream.send(send.encode())
                    data = await stream.receive(BANNER_BYTES)
        except TimeoutError:
            if not data:
                raise ToolError(f"{host}:{port} sent nothing within {timeout} s (try send=...)") from None
        except (OSError, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            if not data:
                raise ToolError(f"cannot read from {host}:{port}: {exc or type(exc).__name__}") from exc
        return json_result({"host": host, "port": port, "banner": data.decode("utf-8", "replace"), "bytes": len(data)})

    @mcp.tool(annotations=READ_ONLY_OPEN)
    async def dns_resolve(
        name: Annotated[str, Field(min_length=1, max_length=253, description="domain name to look up")],
        record_type: RecordType = "A",
        nameserver: Annotated[
            str | None, Field(description="IP of the DNS server (default: system resolv.conf)")
        ] = None,
        port: Port = 53,
        timeout: Timeout = 3.0,
    ) -> CallToolResult:
        """Query DNS directly (dnspython) for A/AAAA/MX/TXT/CNAME/NS/SOA/SRV/CAA records of a name, optionally at a
        given nameserver and port. Returns the records, TTL and which server answered.
        """
        resolver = _resolver(nameserver, port, timeout)
        return json_result(await off_loop(_query, resolver, name, record_type))

    @mcp.tool(annotations=READ_ONLY_OPEN)
    async def dns_reverse(
        ip: Annotated[str, Field(min_length=2, max_length=45, description="IPv4 or IPv6 address")],
        nameserver: Annotated[
            str | None, Field(description="IP of the DNS server (default: system resolv.conf)")
        ] = None,
        port: Port = 53,
        timeout: Timeout = 3.0,
    ) -> CallToolResult:
        """Reverse DNS: the PTR hostnames of an IP address (in-addr.arpa / ip6.arpa) from a DNS server."""
        return json_result(await off_loop(_reverse, ip, nameserver, port, timeout))

    @mcp.tool(annotations=READ_ONLY_OPEN)
    async def hostname_resolve(name: Host) -> CallToolResult:
        """Resolve a host name the way programs on this machine do (getaddrinfo: /etc/hosts, then DNS per
        nsswitch.conf). Returns its addresses and the reverse name of the first. Use it to debug "host not found".
        """
        return json_result(await off_loop(_getaddrinfo, name))

    @mcp.tool(annotations=READ_ONLY_OPEN)
    async def http_health_check(
        url: Annotated[str, Field(pattern=r"^https?://", max_length=2048, description="http(s) URL to GET")],
        expect_status: Annotated[int, Field(ge=100, le=599, description="status counted as healthy")] = 200,
        expect_text: Annotated[str | None, Field(max_length=200, description="substring the body must contain")] = None,
        timeout: Timeout = 5.0,
    ) -> CallToolResult:
        """GET a URL (no redirects followed) and report healthy true/false with status code, latency, content type,
        body size and the first 500 characters of the body. Use it to check a web service or a /health endpoint.
        """
        started = time.perf_counter()
        try:
            async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as client:
                response = await client.get(url)
        except httpx2.TimeoutException as exc:
            raise ToolError(f"{url} did not answer within {timeout} s") from exc
        except httpx2.HTTPError as exc:
            raise ToolError(f"request to {url} failed: {exc}") from exc
        body = response.text
        healthy = response.status_code == expect_status and (expect_text is None or expect_text in body)
        return json_result(
            {
                "url": url,
                "healthy": healthy,
                "status": response.status_code,
                "elapsed_ms": round((time.perf_counter() - started) * 1000, 2),
                "content_type": response.headers.get("content-type"),
                "bytes": len(response.content),
                "location": response.headers.get("location"),
                "body_start": body[:500],
            }
        )
