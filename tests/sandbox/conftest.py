"""Sandbox fixtures: the bwrap backend, a dockerd of our own (skipped without one), projects and a loopback victim."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psutil
import pytest

from hanzo_hub.config import SandboxSettings
from hanzo_hub.errors import SandboxUnavailable
from hanzo_hub.sandbox import Grants, Sandbox, aload_sandbox


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """``DOCKER_HOST`` if it answers, else a dockerd started here (root, Debian docker.io), else skip."""
    explicit = os.environ.get("DOCKER_HOST")
    if explicit:
        yield explicit
        return
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        pytest.skip("no Docker-API daemon (dockerd not installed or not root)")
    root = Path(tempfile.mkdtemp(prefix="dk", dir="/tmp"))  # containerd socket paths must stay short
    host = f"unix://{root}/docker.sock"
    log = (root / "log").open("wb")
    process = subprocess.Popen(
        ["dockerd", "--storage-driver", "overlay2", "--bridge=none", "--iptables=false", "--ip6tables=false",
         "--data-root", f"{root}/data", "--exec-root", f"{root}/exec", "-H", host, "--pidfile", f"{root}/pid"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not (root / "docker.sock").exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    try:
        if process.poll() is not None or not (root / "docker.sock").exists():
            pytest.skip("dockerd did not start")
        yield host
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    kind: str = request.param
    settings = SandboxSettings(docker_host=request.getfixturevalue("docker_host") if kind == "docker" else None)
    try:
        backend = await aload_sandbox(kind, settings)
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    before = _descendants()
    try:
        yield backend
    finally:
        await backend.aclose()
    if kind == "docker":
        import docker

        client = docker.DockerClient(base_url=settings.docker_host)
        try:
            assert client.containers.list(all=True) == [], "containers were left behind"
        finally:
            client.close()
    assert _descendants() - before == set(), "the sandbox left processes running"


def _descendants() -> set[int]:
    me = psutil.Process()
    skip = {p.pid for p in me.children() if p.name() == "dockerd"}
    found = set()
    for child in me.children(recursive=True):
        try:
            if child.pid in skip or any(parent.pid in skip for parent in child.parents()):
                continue
        except psutil.NoSuchProcess:
            continue
        found.add(child.pid)
    return found


@pytest.fixture
def projects(tmp_path: Path) -> tuple[Path, Path]:
    """Project ``a`` (granted) and project ``b`` (someone else's, holding a secret file)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "secret.txt").write_text("b's private data")
    (a / "link").symlink_to(b / "secret.txt")
    return a, b


@pytest.fixture
def grants(projects: tuple[Path, Path]) -> Grants:
    return Grants(writable=(projects[0],))


@pytest.fixture
def victim() -> Iterator[socket.socket]:
    """A TCP listener on the host's 127.0.0.1 that sandboxed code must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()
