"""A stdio downstream launched by the hub through the docker backend (``docker run -i``), with a vault secret."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from mcp import Client

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from hanzo_hub.sandbox.vault import Vault
from tests.conftest import REPO, MakeSettings, inproc, live_children, text_of

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(120)]

SECRET = "sk-docker-1122334455667788"


def on_host(path: Path) -> bool:
    return path.exists()


async def test_docker_sandboxed_server_gets_its_secret_by_env_and_stays_confined(
    make_settings: MakeSettings, docker_host: str, tmp_path: Path
) -> None:
    import docker

    proj = tmp_path / "proj"
    proj.mkdir()
    escape: dict[str, Any] = {
        "command": sys.executable,
        "args": ["-m", "tests.fixtures.escape"],
        "cwd": str(REPO),
        "env": {"API_TOKEN": "${vault:API_TOKEN}"},
    }
    sandbox = {
        "docker_host": docker_host,
        "keyring_service": None,
        "roots": {"*": ["/"]},
        "servers": {"escape": {"sandbox": "docker", "write": [str(proj)], "limits": {"memory_bytes": 512 * 1024**2}}},
    }
    settings = make_settings({"escape": escape, "alpha": inproc("alpha")}, sandbox=sandbox)
    Vault(settings.vault_dir, keyring_service=None).set("API_TOKEN", SECRET)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        token = text_of(await client.call_tool("escape__getenv", {"name": "API_TOKEN"}))
        inside = text_of(await client.call_tool("escape__write", {"path": str(proj / "in.txt"), "text": "hi"}))
        repo = text_of(await client.call_tool("escape__write", {"path": str(REPO / "pwned.txt"), "text": "x"}))
        net = text_of(await client.call_tool("escape__connect", {"host": "1.1.1.1", "port": 80}))
        argv = [" ".join(p.cmdline()) for p in live_children() if p.name() == "docker"]
        other = text_of(await client.call_tool("alpha__echo", {"text": "fine"}))
    assert token == "[redacted:API_TOKEN]"
    assert inside == "ok"
    assert (proj / "in.txt").read_text(encoding="utf-8") == "hi"
    assert repo.startswith("error")
    assert not on_host(REPO / "pwned.txt")
    assert net.startswith("error")
    assert argv
    assert all(SECRET not in line for line in argv)
    assert other == "fine"
    client_ = docker.DockerClient(base_url=docker_host)
    try:
        for _ in range(50):  # ``docker run --rm`` removes the container once the server has exited
            if not client_.containers.list(all=True):
                break
            psutil.wait_procs([], timeout=0.1)
        assert client_.containers.list(all=True) == []
    finally:
        client_.close()
