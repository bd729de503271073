"""A config changed while the hub serves: servers added, removed and changed without a restart, clients told; a
broken config changes nothing; sections that need a restart say so; ``catalog enable`` from another process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
import psutil
import pytest
from mcp import Client, MCPError

from hanzo_hub.config import HubSettings
from hanzo_hub.errors import BackendUnavailable
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from hanzo_hub.sandbox.vault import Vault
from tests.conftest import REPO, MakeSettings, inproc, stdio, text_of, wait_until

pytestmark = pytest.mark.anyio

WATCH = {"watch_config": 0.1}


def rewrite(
    settings: HubSettings, servers: dict[str, Any] | None = None, text: str | None = None, **sections: Any
) -> None:
    """Write the running hub's config file again: other servers, other sections, or raw text."""
    assert settings.config_file is not None
    if text is None:
        body = json.loads(settings.config_file.read_text(encoding="utf-8"))
        if servers is not None:
            body["mcpServers"] = servers
        body.update(sections)
        text = json.dumps(body)
    settings.config_file.write_text(text, encoding="utf-8")


async def names_until(client: Client, done: Callable[[set[str]], bool], timeout: float = 10.0) -> set[str]:
    """The listed tool names, once ``done`` holds for them (bounded)."""
    with anyio.fail_after(timeout):
        while True:
            names = {tool.name for tool in (await client.list_tools()).tools}
            if done(names):
                return names
            await anyio.sleep(0.05)


async def test_servers_added_removed_and_changed_take_effect_while_serving(make_settings: MakeSettings) -> None:
    servers = {"alpha": inproc("alpha"), "down": stdio()}
    settings = make_settings(servers, backends=WATCH)
    told = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy", message_handler=on_message) as c:
        await names_until(c, lambda names: "down__pid" in names)
        before = int(text_of(await c.call_tool("down__pid", {})))
        rewrite(settings, {"beta": inproc("beta"), "down": stdio(env={"RELOADED": "1"})})
        names = await names_until(c, lambda names: "beta__echo" in names and "alpha__echo" not in names)
        after = int(text_of(await c.call_tool("down__pid", {})))
        with pytest.raises(MCPError, match="alpha__echo"):
            await c.call_tool("alpha__echo", {"text": "gone"})
        with anyio.fail_after(5):
            await told.wait()
        assert set(hub.servers) == {"beta", "down"}
    assert "down__pid" in names
    assert after != before  # the changed server was stopped and started under its new spec
    assert not psutil.pid_exists(before) or psutil.Process(before).status() == psutil.STATUS_ZOMBIE


async def test_a_broken_config_changes_nothing_until_it_is_fixed(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, backends=WATCH)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first = await names_until(client, lambda names: "echo" in names)
        rewrite(settings, text='{"mcpServers": {"beta": ')
        await wait_until(lambda: "config reload failed" in caplog.text)
        assert {tool.name for tool in (await client.list_tools()).tools} == first
        assert text_of(await client.call_tool("echo", {"text": "still"})) == "still"
        rewrite(settings, text=json.dumps({"mcpServers": {"alpha": inproc("alpha"), "beta": inproc("beta")},
                                           "memory": {"enabled": False}, "backends": WATCH}))  # fmt: skip
        await names_until(client, lambda names: "beta__echo" in names and "alpha__echo" in names)
        assert set(hub.servers) == {"alpha", "beta"}


async def test_sections_that_need_a_restart_are_named(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, backends=WATCH)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.list_tools()
        rewrite(settings, http={"port": 9911})
        await wait_until(lambda: "restart the hub" in caplog.text)
        assert hub.settings.http.port != 9911
    assert "config reload: http changed; restart the hub to apply that" in caplog.text


async def test_a_catalog_server_enabled_from_the_command_line_appears(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, backends=WATCH)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await names_until(client, lambda names: "echo" in names)
        assert settings.config_file is not None
        command = [sys.executable, "-m", "hanzo_hub", "catalog", "enable", "redis"]
        command += ["--config", str(settings.config_file), "--home", str(settings.home)]
        await anyio.to_thread.run_sync(lambda: subprocess.run(command, cwd=REPO, check=True, capture_output=True))
        names = await names_until(client, lambda names: "redis__get" in names)
        assert hub.pool.get("redis").state.value == "stopped"  # listed from its packaged tools; starts on first use
    assert "alpha__echo" in names  # two servers now: prefixes on


async def test_a_secret_set_after_start_waits_for_a_restart(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    """The hub redacts the secrets it started with; one set later must not reach a server unredacted."""
    settings = make_settings({"alpha": inproc("alpha")}, backends=WATCH)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await names_until(client, lambda names: "echo" in names)
        Vault(settings.vault_dir, keyring_service=settings.sandbox.keyring_service).set("LATE", "late-secret-value")
        rewrite(settings, {"alpha": inproc("alpha"), "late": stdio(env={"TOKEN": "${vault:LATE}"})})
        await wait_until(lambda: "the vault changed since the hub started" in caplog.text)
        await names_until(client, lambda names: "alpha__echo" in names)
        assert "late" in hub.servers
        assert "LATE" not in hub.secrets


async def test_a_removed_server_never_starts_again(make_settings: MakeSettings) -> None:
    """A call that fetched the supervisor just before the reload removed it must not start the old server."""
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, backends=WATCH)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await names_until(client, lambda names: "alpha__echo" in names)
        fetched = hub.pool.get("alpha")
        rewrite(settings, {"beta": inproc("beta")})
        await names_until(client, lambda names: "alpha__echo" not in names)
        with pytest.raises(BackendUnavailable, match="was removed from the configuration"):
            await fetched.ensure()
        with pytest.raises(BackendUnavailable, match="is not configured"):
            hub.pool.get("alpha")
        assert fetched.state.value == "stopped"
