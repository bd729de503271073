"""A stdio downstream launched through bubblewrap by the hub: its escape attempts fail, the hub and others carry on.

The per-call path policy is opened wide here (root ``/``) so that what stops each attempt is the sandbox itself.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from hanzo_hub.hub.status import health
from hanzo_hub.sandbox.cgroup import CgroupFactory
from hanzo_hub.sandbox.vault import Vault
from tests.conftest import REPO, MakeSettings, inproc, live_children, text_of

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
    pytest.mark.usefixtures("no_leaked_children"),
]

SECRET = "sk-live-0a1b2c3d4e5f6789"
ROOT_VICTIM = Path("/root/pwned-by-sandbox.txt")
USR_VICTIM = Path("/usr/pwned-by-sandbox.txt")


def on_host(path: Path) -> bool:
    """Whether ``path`` exists on the host (outside any sandbox)."""
    return path.exists()


def escape(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "tests.fixtures.escape"], "cwd": str(REPO), **extra}


class Listener:
    """A TCP listener on the host's loopback that counts accepted connections."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    box = Listener()
    try:
        yield box
    finally:
        box.sock.close()
        box.thread.join(5)


async def test_sandboxed_server_cannot_escape_and_the_hub_is_unaffected(
    make_settings: MakeSettings, tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.setenv("HUB_PRIVATE", "hub-private-value")
    sandbox = {
        "roots": {"*": ["/"]},
        "keyring_service": None,
        "servers": {"escape": {"sandbox": "bwrap", "write": [str(proj)]}},
    }
    settings = make_settings(
        {"escape": escape(env={"API_TOKEN": "${vault:API_TOKEN}"}), "alpha": inproc("alpha")}, sandbox=sandbox
    )
    Vault(settings.vault_dir, keyring_service=None).set("API_TOKEN", SECRET)
    outside = tmp_path / "outside.txt"

    async def call(client: Client, tool: str, **arguments: Any) -> str:
        result = await client.call_tool(f"escape__{tool}", arguments)
        assert not result.is_error, text_of(result)
        return text_of(result)

    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        assert await call(client, "write", path=str(proj / "inside.txt"), text="hi") == "ok"
        wrote_outside = await call(client, "write", path=str(outside), text="pwned")
        wrote_repo = await call(client, "write", path=str(REPO / "pwned.txt"), text="pwned")
        wrote_root = await call(client, "write", path=str(ROOT_VICTIM), text="pwned")
        wrote_usr = await call(client, "write", path=str(USR_VICTIM), text="pwned")
        vault_key = await call(client, "read", path=str(settings.vault_dir / "vault.key"))
        shadow = await call(client, "read", path="/etc/shadow")
        connected = await call(client, "connect", host="127.0.0.1", port=listener.port)
        token = await call(client, "getenv", name="API_TOKEN")
        private = await call(client, "getenv", name="HUB_PRIVATE")
        bwraps = [p for p in live_children() if p.name() == "bwrap"]
        cmdlines = [" ".join(p.cmdline()) for p in bwraps]
        echoed = await client.call_tool("alpha__echo", {"text": "other servers work"})
        alive = await call(client, "whoami")

    assert (proj / "inside.txt").read_text(encoding="utf-8") == "hi"
    # writes outside the grants land in the sandbox's private tmpfs root (or fail): the host never sees them
    assert wrote_outside in ("ok", "error: No such file or directory")
    assert wrote_root in ("ok", "error: No such file or directory")
    assert not outside.exists()
    assert not on_host(ROOT_VICTIM)
    assert "Read-only file system" in wrote_usr
    assert not on_host(USR_VICTIM)
    assert "Read-only file system" in wrote_repo
    assert not (REPO / "pwned.txt").exists()
    assert vault_key.startswith("error")
    assert shadow.startswith("error")
    assert connected.startswith("error")
    assert listener.accepted == 0
    assert token == "[redacted:API_TOKEN]"  # the server got the secret (env at launch); the client sees it redacted
    assert private == "<unset>"
    assert cmdlines
    assert all(SECRET not in line for line in cmdlines)  # never in argv, where any local user could read it
    assert text_of(echoed) == "other servers work"
    assert alive.startswith("pid ")
    assert SECRET not in (settings.log_dir / "audit.jsonl").read_text(encoding="utf-8")


@pytest.mark.skipif(not CgroupFactory().available, reason=f"no usable cgroup: {CgroupFactory().reason}")
async def test_sandboxed_server_is_held_by_its_cgroup_pids_limit(make_settings: MakeSettings) -> None:
    sandbox = {"servers": {"escape": {"sandbox": "bwrap", "limits": {"pids": 24, "memory_bytes": 512 * 1024**2}}}}
    settings = make_settings({"escape": escape(), "alpha": inproc("alpha")}, sandbox=sandbox)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        # Concurrent calls first: the server's thread pool keeps idle threads, so that what it does while its forks
        # hold every pid of its cgroup (answer a request, write a notification) needs no new thread.
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(client.call_tool, "escape__whoami", {})
        spawned = await client.call_tool("escape__spawn", {"n": 200})
        still = await client.call_tool("escape__whoami", {})
        other = await client.call_tool("alpha__add", {"a": 1, "b": 2})
    forked = text_of(spawned)
    if spawned.is_error:
        # The server still needed a new thread inside that window and died of its own limit (seen once in CI, on a
        # loaded machine): held all the same. The hub says which server failed, restarts it on the next call and
        # keeps serving the others.
        assert "escape" in forked, forked
    else:
        count = int(forked.split()[1].rstrip(";"))
        assert count < 24, forked
        assert "error" in forked
    assert not still.is_error
    assert text_of(other) == "3"


async def test_a_missing_backend_fails_that_server_only_with_the_reason(make_settings: MakeSettings) -> None:
    servers = {"boxed": escape(), "alpha": inproc("alpha")}
    async with Hub.open(make_settings(servers)) as hub:  # unconfined first: its tools are listed and snapshotted
        assert "boxed__whoami" in {tool.name for tool in await hub.list_tools()}
    sandbox = {"docker_host": "unix:///nonexistent/docker.sock", "servers": {"boxed": {"sandbox": "docker"}}}
    settings = make_settings(servers, sandbox=sandbox)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        failed = await client.call_tool("boxed__whoami", {})
        other = await client.call_tool("alpha__echo", {"text": "fine"})
        boxed = health(hub)["detail"]["boxed"]
    assert boxed["last_error"] is not None
    assert "no Docker-API daemon answers" in boxed["last_error"]
    assert failed.is_error
    reason = text_of(failed)
    assert "boxed" in reason
    assert "no Docker-API daemon answers at unix:///nonexistent/docker.sock" in reason, reason
    assert text_of(other) == "fine"
    assert not any("tests.fixtures.escape" in " ".join(p.cmdline()) for p in live_children())


def test_listener_helper_counts_connections(listener: Listener) -> None:
    with socket.create_connection(("127.0.0.1", listener.port), timeout=2):
        pass
    psutil.wait_procs([], timeout=0)
    for _ in range(100):
        if listener.accepted:
            break
        threading.Event().wait(0.02)
    assert listener.accepted == 1  # so the zero above means "unreachable", not "never counted"


def fixture_manifest(root: Path) -> Path:
    """A catalog folder with one manifest launching the escape server, granted only ``{project}``."""
    folder = root / "manifests" / "escapee"
    folder.mkdir(parents=True)
    manifest = {
        "name": "dev.hanzo-hub/escapee",
        "description": "Escape attempts, for sandbox tests",
        "version": "1.0.0",
        "_meta": {
            "dev.hanzo-hub/catalog": {
                "id": "escapee",
                "category": "system",
                "origin": "fixture",
                "install": {"kind": "none"},
                "launch": {"command": "{python}", "args": ["-m", "tests.fixtures.escape"], "cwd": str(REPO)},
                "offline": {"status": "verified"},
                "sandbox": {"network": "none", "fs": {"read": ["{project}"], "write": ["{project}"]}},
            }
        },
    }
    (folder / "server.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root / "manifests"


async def test_a_catalog_server_is_sandboxed_and_policed_by_its_manifest(
    make_settings: MakeSettings, tmp_path: Path, listener: Listener
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    catalog = {"manifest_dirs": [str(fixture_manifest(tmp_path))], "enabled": ["escapee"], "project": str(proj)}
    settings = make_settings({"alpha": inproc("alpha")}, catalog=catalog)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        assert hub.launches["escapee"].kind == "bwrap"
        inside = await client.call_tool("escapee__write", {"path": "made.txt", "text": "hi"})
        outside = await client.call_tool("escapee__write", {"path": str(tmp_path / "x.txt"), "text": "x"})
        connected = await client.call_tool("escapee__connect", {"host": "127.0.0.1", "port": listener.port})
    assert text_of(inside) == "ok"  # relative: made absolute under the project, the only root by default
    assert (proj / "made.txt").read_text(encoding="utf-8") == "hi"
    assert outside.is_error
    assert "policy denied escapee/write (path)" in text_of(outside)  # stopped before the sandbox even saw it
    assert text_of(connected).startswith("error")
    assert listener.accepted == 0


async def test_per_tool_limits_of_a_manifest_apply_and_config_overrides_them(
    make_settings: MakeSettings, tmp_path: Path
) -> None:
    folder = tmp_path / "manifests" / "limited"
    folder.mkdir(parents=True)
    manifest = {
        "name": "dev.hanzo-hub/limited",
        "description": "Per-tool limits, for policy tests",
        "version": "1.0.0",
        "_meta": {
            "dev.hanzo-hub/catalog": {
                "id": "limited",
                "category": "system",
                "origin": "fixture",
                "install": {"kind": "none"},
                "launch": {"command": "{python}", "args": ["-m", "tests.fixtures.downstream", "ok", "limited"]},
                "offline": {"status": "verified"},
                "sandbox": {
                    "backend": "none",
                    "tools": {
                        "fail": {"enabled": False},
                        "echo": {"maxResultBytes": 64},
                        "add": {"ratePerMinute": 1, "burst": 1},
                    },
                },
            }
        },
    }
    (folder / "server.json").write_text(json.dumps(manifest), encoding="utf-8")
    catalog = {"manifest_dirs": [str(tmp_path / "manifests")], "enabled": ["limited"]}
    override = {"servers": {"limited": {"tools": {"add": {"burst": 3}}}}, "keyring_service": None}
    settings = make_settings({"alpha": inproc("alpha")}, catalog=catalog, sandbox=override)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        assert hub.launches["limited"].kind == "none"
        refused = await client.call_tool("limited__fail", {"reason": "r"})
        capped = await client.call_tool("limited__echo", {"text": "y" * 500})
        added = [await client.call_tool("limited__add", {"a": 1, "b": 2}) for _ in range(4)]
    assert refused.is_error
    assert "policy denied limited/fail (disabled)" in text_of(refused)
    assert "truncated by policy" in text_of(capped)
    assert "y" * 100 not in text_of(capped)
    assert [r.is_error for r in added] == [False, False, False, True]  # config's burst of 3 beats the manifest's 1
