"""The system server over MCP against this machine, with loopback HTTP, DNS and TCP services started here."""

from __future__ import annotations

import http.server
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.rcode
import dns.rrset
import psutil
import pytest

from servers.system.server import mcp
from tests.servers.conftest import Client, err, ok

pytestmark = pytest.mark.anyio

EXPECTED_TOOLS = 34


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp) as connected:
        yield connected


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body = (200, b"status: ok") if self.path == "/health" else (503, b"down")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


ZONE = {("svc.test.", "A"): "127.0.0.5", ("svc.test.", "MX"): "10 mail.svc.test.",
        ("5.0.0.127.in-addr.arpa.", "PTR"): "svc.test."}  # fmt: skip


@pytest.fixture(scope="module")
def dns_port() -> Iterator[int]:
    """A tiny authoritative DNS server on 127.0.0.1 (UDP) answering from ZONE, NXDOMAIN otherwise."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            query = dns.message.from_wire(data)
            response = dns.message.make_response(query)
            question = query.question[0]
            name, rtype = question.name.to_text(), dns.rdatatype.to_text(question.rdtype)
            if (name, rtype) in ZONE:
                response.answer.append(dns.rrset.from_text(name, 300, "IN", rtype, ZONE[(name, rtype)]))
            elif not any(key[0] == name for key in ZONE):
                response.set_rcode(dns.rcode.NXDOMAIN)
            sock.sendto(response.to_wire(), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join(2)
    sock.close()


@pytest.fixture(scope="module")
def banner_port() -> Iterator[int]:
    """A TCP service that greets like SMTP and echoes one line back."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"220 test.local ESMTP ready\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    if child.poll() is None:
        child.kill()
    child.wait(5)


async def test_lists_every_tool_with_annotations(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) == EXPECTED_TOOLS
    for tool in tools:
        assert tool.annotations is not None, tool.name
        assert tool.annotations.read_only_hint is not None, tool.name
        assert len(tool.description or "") > 40, tool.name


async def test_host_tools_describe_this_machine(client: Client) -> None:
    host = ok(await client.call_tool("host_info", {}))
    assert host["hostname"] == socket.gethostname()
    assert host["cpu_count"] == psutil.cpu_count()
    assert host["uptime_seconds"] > 0
    release = ok(await client.call_tool("os_release", {}))
    assert release["ID"] == platform.freedesktop_os_release()["ID"]
    users = ok(await client.call_tool("users_logged_in", {}))
    assert [row[0] for row in users["rows"]] == [u.name for u in psutil.users()]
    cpu = ok(await client.call_tool("cpu_info", {}))
    assert cpu["logical_cores"] == psutil.cpu_count()
    assert cpu["stats"]["ctx_switches"] > 0
    usage = ok(await client.call_tool("cpu_usage", {"interval": 0.1}))
    assert 0 <= usage["percent"] <= 100
    assert len(usage["per_cpu_percent"]) == psutil.cpu_count()
    load = ok(await client.call_tool("load_average", {}))
    assert set(load["load"]) == {"1m", "5m", "15m"}
    memory = ok(await client.call_tool("memory_info", {}))
    assert memory["virtual"]["total"] == psutil.virtual_memory().total


async def test_disk_tools(client: Client, tmp_path: Path) -> None:
    parts = ok(await client.call_tool("disk_partitions", {}))
    assert "/" in [row[1] for row in parts["rows"]]
    usage = ok(await client.call_tool("disk_usage", {"path": str(tmp_path)}))
    assert usage["total"] > usage["free"] > 0
    assert "give an existing path" in err(await client.call_tool("disk_usage", {"path": str(tmp_path / "nope")}))
    io = ok(await client.call_tool("disk_io", {}))
    assert {row[0] for row in io["rows"]} == set(psutil.disk_io_counters(perdisk=True))


async def test_kernel_and_cgroup_views(client: Client) -> None:
    value = ok(await client.call_tool("sysctl_get", {"key": "kernel.pid_max"}))
    assert int(value["value"]) == int(Path("/proc/sys/kernel/pid_max").read_text())  # noqa: ASYNC240
    assert "no kernel parameter" in err(await client.call_tool("sysctl_get", {"key": "kernel.nope_nope"}))
    assert err(await client.call_tool("sysctl_get", {"key": "../../etc/passwd"}))
    own = Path("/proc/self/cgroup").read_text()  # noqa: ASYNC240
    if "0::" not in own:
        assert "unified cgroup v2" in err(await client.call_tool("cgroup_limits", {}))
        return
    limits = ok(await client.call_tool("cgroup_limits", {}))
    assert own.split("0::", 1)[1].splitlines()[0] == limits["cgroup"]


async def test_process_views_find_a_spawned_child(client: Client, sleeper: subprocess.Popen[bytes]) -> None:
    listed = ok(await client.call_tool("process_list", {"name": "time.sleep", "sort": "pid", "limit": 500}))
    assert sleeper.pid in [row[0] for row in listed["rows"]]
    info = ok(await client.call_tool("process_info", {"pid": sleeper.pid}))
    assert info["ppid"] == os.getpid()
    assert "time.sleep(60)" in " ".join(info["cmdline"])
    tree = ok(await client.call_tool("process_tree", {"pid": os.getpid(), "depth": 1}))
    assert sleeper.pid in [c["pid"] for c in tree["children"]]
    with tempfile.NamedTemporaryFile("w") as held:
        files = ok(await client.call_tool("process_open_files", {"pid": os.getpid()}))
        assert held.name in [row[1] for row in files["rows"]]
    limits = ok(await client.call_tool("process_rlimits", {"pid": sleeper.pid}))
    assert {r[0]: r[1:] for r in limits["rows"]}["nofile"][0] > 0
    assert "no process" in err(await client.call_tool("process_info", {"pid": 2**22}))
    assert "invalid name regex" in err(await client.call_tool("process_list", {"name": "("}))


async def test_process_kill_stops_own_child_and_refuses_others(
    client: Client, sleeper: subprocess.Popen[bytes]
) -> None:
    killed = ok(await client.call_tool("process_kill", {"pid": sleeper.pid, "sig": "TERM"}))
    assert killed["exited"] is True
    assert killed["name"].startswith("python")
    assert killed["exit_code"] == -15  # this test is the parent, so the server's wait reaped it
    assert not psutil.pid_exists(sleeper.pid)
    assert "own process" in err(await client.call_tool("process_kill", {"pid": os.getpid()}))
    # a process of another user: as root the test starts one as nobody; otherwise pid 1 (root's init) is one
    other = subprocess.Popen(["sleep", "30"], user=65534) if os.getuid() == 0 else None  # noqa: ASYNC220
    try:
        pid = other.pid if other is not None else 1
        assert "another user" in err(await client.call_tool("process_kill", {"pid": pid}))
        assert psutil.pid_exists(pid)
    finally:
        if other is not None:
            other.kill()
            other.wait(5)
    assert err(await client.call_tool("process_kill", {"pid": 1, "sig": "STOP"}))


async def test_network_inventory(client: Client, banner_port: int) -> None:
    nics = ok(await client.call_tool("net_interfaces", {}))
    lo = next(i for i in nics["interfaces"] if i["name"] == "lo")
    assert "127.0.0.1" in [a["address"] for a in lo["addresses"]]
    conns = ok(await client.call_tool("net_connections", {"kind": "tcp", "status": "LISTEN", "port": banner_port}))
    assert conns["rows"]
    assert conns["rows"][0][1] == f"127.0.0.1:{banner_port}"
    assert conns["rows"][0][4] == os.getpid()
    io = ok(await client.call_tool("net_io", {}))
    assert "lo" in [row[0] for row in io["rows"]]
    routes = ok(await client.call_tool("net_routes", {}))
    kernel_rows = Path("/proc/net/route").read_text().splitlines()[1:]  # noqa: ASYNC240
    assert [r[2] for r in routes["rows"]] == [line.split()[0] for line in kernel_rows]
    free = ok(await client.call_tool("port_find_free", {}))
    with socket.create_server(("127.0.0.1", free["port"])):
        pass
    assert "cannot bind" in err(await client.call_tool("port_find_free", {"host": "192.0.2.1"}))


async def test_port_check_and_banner(client: Client, banner_port: int) -> None:
    opened = ok(await client.call_tool("port_check", {"host": "127.0.0.1", "port": banner_port}))
    assert opened["state"] == "open"
    free = ok(await client.call_tool("port_find_free", {}))["port"]
    closed = ok(await client.call_tool("port_check", {"host": "127.0.0.1", "port": free}))
    assert closed["state"] == "closed"
    banner = ok(await client.call_tool("tcp_banner", {"host": "127.0.0.1", "port": banner_port}))
    assert banner["banner"].startswith("220 test.local ESMTP")
    assert "cannot read" in err(await client.call_tool("tcp_banner", {"host": "127.0.0.1", "port": free}))
    assert err(await client.call_tool("port_check", {"host": "127.0.0.1", "port": 70000}))


async def test_dns_against_a_loopback_server(client: Client, dns_port: int) -> None:
    args = {"nameserver": "127.0.0.1", "port": dns_port}
    a = ok(await client.call_tool("dns_resolve", {"name": "svc.test", **args}))
    assert a["records"] == ["127.0.0.5"]
    assert a["ttl"] == 300
    mx = ok(await client.call_tool("dns_resolve", {"name": "svc.test", "record_type": "MX", **args}))
    assert mx["records"] == ["10 mail.svc.test."]
    txt = ok(await client.call_tool("dns_resolve", {"name": "svc.test", "record_type": "TXT", **args}))
    assert txt["records"] == []
    assert "NXDOMAIN" in err(await client.call_tool("dns_resolve", {"name": "nope.test", **args}))
    reverse = ok(await client.call_tool("dns_reverse", {"ip": "127.0.0.5", **args}))
    assert reverse["hostnames"] == ["svc.test."]
    assert "not an IPv4" in err(await client.call_tool("dns_reverse", {"ip": "x.y", **args}))
    assert "must be an IP" in err(await client.call_tool("dns_resolve", {"name": "a.b", "nameserver": "dns.host"}))


async def test_hostname_resolve_uses_etc_hosts(client: Client) -> None:
    found = ok(await client.call_tool("hostname_resolve", {"name": "localhost"}))
    assert "127.0.0.1" in found["addresses"] or "::1" in found["addresses"]
    assert "cannot resolve" in err(await client.call_tool("hostname_resolve", {"name": "no-such-host.invalid"}))


async def test_http_health_check(client: Client, http_url: str) -> None:
    up = ok(await client.call_tool("http_health_check", {"url": f"{http_url}/health", "expect_text": "ok"}))
    assert up["healthy"] is True
    assert up["status"] == 200
    assert up["body_start"] == "status: ok"
    down = ok(await client.call_tool("http_health_check", {"url": f"{http_url}/other"}))
    assert down["healthy"] is False
    assert down["status"] == 503
    free = ok(await client.call_tool("port_find_free", {}))["port"]
    assert "failed" in err(await client.call_tool("http_health_check", {"url": f"http://127.0.0.1:{free}/"}))
    assert err(await client.call_tool("http_health_check", {"url": "ftp://example"}))


async def test_file_tools_stay_inside_allowed_roots(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "logs").mkdir(parents=True)
    outside.mkdir()
    log = root / "logs" / "app.log"
    log.write_text("".join(f"line {i} {'ERROR' if i % 10 == 0 else 'info'}\n" for i in range(1, 101)))
    (root / "big.bin").write_bytes(b"x" * 5000)
    (outside / "secret.txt").write_text("nope")
    (root / "escape").symlink_to(outside / "secret.txt")
    monkeypatch.setenv("SYSTEM_ALLOWED_ROOTS", str(root))
    tail = ok(await client.call_tool("file_tail", {"path": str(log), "lines": 3}))
    assert tail["lines"] == ["line 98 info", "line 99 info", "line 100 ERROR"]
    errors = ok(await client.call_tool("file_tail", {"path": str(log), "lines": 2, "grep": "ERROR"}))
    assert errors["lines"] == ["line 90 ERROR", "line 100 ERROR"]
    assert "outside the allowed roots" in err(
        await client.call_tool("file_tail", {"path": str(outside / "secret.txt")})
    )
    assert "outside the allowed roots" in err(await client.call_tool("file_tail", {"path": str(root / "escape")}))
    assert "not a regular file" in err(await client.call_tool("file_tail", {"path": str(root)}))
    size = ok(await client.call_tool("dir_size", {"path": str(root)}))
    assert size["total_bytes"] == 5000 + log.stat().st_size
    assert size["children"][0] == {"name": ".", "bytes": 5000}
    largest = ok(await client.call_tool("largest_files", {"path": str(root), "limit": 1}))
    assert largest["rows"] == [[str(root / "big.bin"), 5000]]
    assert "outside" in err(await client.call_tool("largest_files", {"path": "/etc"}))


async def test_env_list_redacts_secrets(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HZTEST_API_TOKEN", "abc123")
    monkeypatch.setenv("HZTEST_DB_URL", "postgres://user:hunter2@db/x")
    monkeypatch.setenv("HZTEST_COLOR", "blue")
    listed = ok(await client.call_tool("env_list", {"prefix": "HZTEST_"}))
    values = {row[0]: row[1] for row in listed["rows"]}
    assert values == {"HZTEST_API_TOKEN": "<redacted>", "HZTEST_DB_URL": "<redacted>", "HZTEST_COLOR": "blue"}


async def test_which_finds_installed_commands(client: Client) -> None:
    found = ok(await client.call_tool("which", {"commands": ["sh", "no-such-cmd-xyz"]}))
    assert found["rows"][0][1]
    assert found["missing"] == ["no-such-cmd-xyz"]
    assert err(await client.call_tool("which", {"commands": ["rm -rf /"]}))
