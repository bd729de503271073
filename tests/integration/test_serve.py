"""``hanzo-hub serve`` as a real process: HTTP clients of both eras, and SIGTERM leaves no child behind."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from anyio.abc import Process
from mcp import Client

from hanzo_hub.config import HubSettings
from tests.conftest import REPO, MakeSettings, alive, free_port, hub_command, live_children, stdio, text_of, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leaked_children")]


@asynccontextmanager
async def hub_process(settings: HubSettings, *extra: str) -> AsyncIterator[Process]:
    """Run ``hanzo-hub serve``; on the way out make sure it is gone (killed if a test left it running)."""
    process = await anyio.open_process(
        hub_command(settings, *extra), cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            await process.wait()
        await process.aclose()


async def wait_for_http(url: str) -> None:
    """Poll ``/healthz`` until the subprocess serves (bounded): the port belongs to another process."""
    async with httpx2.AsyncClient(timeout=2) as http:
        with anyio.fail_after(30):
            while True:
                try:
                    if (await http.get(url)).status_code == 200:
                        return
                except httpx2.TransportError:
                    pass
                await anyio.sleep(0.05)


async def terminate_and_check(process: Process, children: list[int]) -> None:
    assert children, "the hub started no downstream server"
    process.send_signal(signal.SIGTERM)
    with anyio.fail_after(20):
        await process.wait()
    await wait_until(lambda: not any(alive(pid) for pid in children))
    # uvicorn re-raises the signal after its graceful shutdown, so the HTTP hub ends "killed by SIGTERM".
    assert process.returncode in (0, -signal.SIGTERM)


async def test_sigterm_stops_the_stdio_hub_and_every_downstream(make_settings: MakeSettings) -> None:
    settings = make_settings({"one": stdio(name="one"), "two": stdio(name="two")})
    async with hub_process(settings) as process:
        await wait_until(lambda: len(live_children(process.pid)) >= 2, timeout=30)
        children = [child.pid for child in live_children(process.pid)]
        await terminate_and_check(process, children)


async def test_closing_stdin_stops_the_stdio_hub_and_every_downstream(make_settings: MakeSettings) -> None:
    settings = make_settings({"one": stdio(name="one"), "two": stdio(name="two")})
    async with hub_process(settings) as process:
        await wait_until(lambda: len(live_children(process.pid)) >= 2, timeout=30)
        children = [child.pid for child in live_children(process.pid)]
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(20):
            await process.wait()
        await wait_until(lambda: not any(alive(pid) for pid in children))
    assert process.returncode == 0


async def test_http_hub_serves_clients_of_both_eras_and_stops_on_sigterm(make_settings: MakeSettings) -> None:
    settings = make_settings({"one": stdio(name="one"), "two": stdio(name="two")})
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with hub_process(settings, "--http", "--port", str(port)) as process:
        await wait_for_http(f"{base}/healthz")
        results = {}
        for mode in ("legacy", "auto"):
            async with Client(f"{base}/mcp", mode=mode) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                echoed = await client.call_tool("two__echo", {"text": f"hello {mode}"})
                results[mode] = (client.protocol_version, names, text_of(echoed))
        children = [child.pid for child in live_children(process.pid)]
        await terminate_and_check(process, children)
    assert results["legacy"][0] == "2025-11-25"
    assert results["auto"][0] == "2026-07-28"
    for mode, (_version, names, echoed) in results.items():
        assert {"one__echo", "two__echo", "one__add"} <= names
        assert echoed == f"hello {mode}"


async def test_a_killed_hub_takes_its_servers_with_it(make_settings: MakeSettings) -> None:
    """SIGKILL runs no cleanup: the kernel's parent-death signal stops even a server that ignores its stdin closing."""
    settings = make_settings({"stays": stdio("linger", name="stays")})
    port = free_port()
    async with hub_process(settings, "--http", "--port", str(port)) as process:
        await wait_for_http(f"http://127.0.0.1:{port}/healthz")
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            echoed = await client.call_tool("echo", {"text": "started"})
        children = [child.pid for child in live_children(process.pid)]
        process.kill()
        with anyio.fail_after(10):
            await process.wait()
    assert text_of(echoed) == "started"
    assert children, "the hub started no downstream server"
    await wait_until(lambda: not any(alive(pid) for pid in children), timeout=10)


async def test_a_config_error_exits_with_status_2_before_serving(make_settings: MakeSettings, tmp_path: object) -> None:
    settings = make_settings({"one": stdio(name="one")})
    assert settings.config_file is not None
    settings.config_file.write_text('{"mcpServers": {"bad": {"type": "telepathy"}}}', encoding="utf-8")
    done = await anyio.run_process(hub_command(settings), cwd=REPO, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert b"telepathy" in done.stderr
