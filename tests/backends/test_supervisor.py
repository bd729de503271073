"""Supervised subprocess servers: crash and restart, hangs, junk on stdout, launch failures, no leaked children."""

from __future__ import annotations

import sys

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.backends.supervisor import State
from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, alive, inproc, live_children, stdio, text_of, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leaked_children")]

ECHO = types.Tool(name="echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}})


def give_snapshot(settings: HubSettings, server: str) -> None:
    """Let the hub list (and route to) a server that will never list itself."""
    SnapshotStore(settings.snapshot_dir).save(server, Listing(tools=(ECHO,)))


async def test_a_crash_mid_call_names_the_server_and_the_next_call_restarts_it(make_settings: MakeSettings) -> None:
    settings = make_settings({"crashy": stdio(name="crashy"), "alpha": inproc("alpha")})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first_pid = (await client.call_tool("crashy__pid", {})).structured_content
        crashed = await client.call_tool("crashy__crash", {})
        other = await client.call_tool("alpha__echo", {"text": "unaffected"})
        second_pid = (await client.call_tool("crashy__pid", {})).structured_content
        supervisor = hub.pool.get("crashy")
        assert supervisor.starts == 2
    assert crashed.is_error
    assert "'crashy'" in text_of(crashed)
    assert "mid-request" in text_of(crashed)
    assert text_of(other) == "unaffected"
    assert first_pid is not None
    assert second_pid is not None
    assert first_pid["result"] != second_pid["result"]
    assert not alive(first_pid["result"])
    assert not alive(second_pid["result"])


async def test_a_call_that_outlives_call_timeout_is_an_error_result_and_the_server_stays(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings({"slow": stdio(name="slow"), "alpha": inproc("alpha")}, backends={"call_timeout": 0.5})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        timed_out = await client.call_tool("slow__sleep", {"seconds": 60})
        after = await client.call_tool("slow__echo", {"text": "still alive"})
        assert hub.pool.get("slow").starts == 1
    assert timed_out.is_error
    assert "'slow'" in text_of(timed_out)
    assert "did not answer within 0.5 s" in text_of(timed_out)
    assert text_of(after) == "still alive"


async def test_a_per_server_call_timeout_overrides_the_default(make_settings: MakeSettings) -> None:
    settings = make_settings({"slow": stdio(name="slow", call_timeout=0.3), "alpha": inproc("alpha")})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        timed_out = await client.call_tool("slow__sleep", {"seconds": 60})
    assert "did not answer within 0.3 s" in text_of(timed_out)


async def test_a_server_that_never_answers_the_handshake_is_reported_and_killed(make_settings: MakeSettings) -> None:
    settings = make_settings(
        {"stuck": stdio("hang", "stuck"), "alpha": inproc("alpha")}, backends={"connect_timeout": 0.5}
    )
    give_snapshot(settings, "stuck")
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        result = await client.call_tool("stuck__echo", {"text": "x"})
        fine = await client.call_tool("alpha__echo", {"text": "fine"})
        assert hub.pool.get("stuck").state is State.STOPPED
        await wait_until(lambda: not live_children())
    assert result.is_error
    assert "'stuck'" in text_of(result)
    assert "handshake in time" in text_of(result)
    assert text_of(fine) == "fine"


async def test_non_json_lines_on_stdout_are_skipped(make_settings: MakeSettings) -> None:
    settings = make_settings({"noisy": stdio("garbage", "noisy"), "alpha": inproc("alpha")})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        echoed = await client.call_tool("noisy__echo", {"text": "through the noise"})
        junk = hub.pool.get("noisy").junk_lines
    assert "noisy__echo" in names
    assert text_of(echoed) == "through the noise"
    assert junk >= 1


async def test_a_missing_command_is_a_clear_error_and_other_servers_answer(make_settings: MakeSettings) -> None:
    missing = "/nonexistent/hanzo-hub-test/no-such-server"
    settings = make_settings({"ghost": {"command": missing}, "alpha": inproc("alpha")})
    give_snapshot(settings, "ghost")
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        result = await client.call_tool("ghost__echo", {"text": "x"})
        fine = await client.call_tool("alpha__echo", {"text": "fine"})
    assert result.is_error
    assert "'ghost'" in text_of(result)
    assert "command not found" in text_of(result)
    assert missing in text_of(result)
    assert text_of(fine) == "fine"


async def test_a_server_exiting_at_start_is_reported_with_its_stderr(make_settings: MakeSettings) -> None:
    settings = make_settings({"quitter": stdio("exit", "quitter"), "alpha": inproc("alpha")})
    give_snapshot(settings, "quitter")
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        result = await client.call_tool("quitter__echo", {"text": "x"})
        fine = await client.call_tool("alpha__echo", {"text": "fine"})
        log = hub.pool.get("quitter").log_path.read_text(encoding="utf-8")
    assert result.is_error
    assert "'quitter'" in text_of(result)
    assert "refusing to start" in text_of(result)  # the server's own stderr, from its log
    assert "refusing to start" in log
    assert text_of(fine) == "fine"


async def test_the_breaker_opens_for_a_server_that_keeps_exiting(make_settings: MakeSettings) -> None:
    exits = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    settings = make_settings(
        {"flaky": exits, "alpha": inproc("alpha")},
        backends={"breaker_threshold": 2, "restart_backoff": 0.01, "breaker_cooldown": 600},
    )
    give_snapshot(settings, "flaky")
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        results = [await client.call_tool("flaky__echo", {"text": "x"}) for _ in range(4)]
        flaky = hub.pool.get("flaky")
        assert flaky.starts == 2
        assert flaky.status()["circuit_open"]
    assert all(r.is_error and "'flaky'" in text_of(r) for r in results)
    assert "consecutive failures" in text_of(results[-1])


async def test_an_idle_subprocess_exits_and_a_new_one_serves_the_next_call(make_settings: MakeSettings) -> None:
    settings = make_settings({"lazy": stdio(name="lazy"), "alpha": inproc("alpha")}, backends={"idle_timeout": 0.3})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first = (await client.call_tool("lazy__pid", {})).structured_content
        assert first is not None
        await wait_until(lambda: hub.pool.get("lazy").state is State.STOPPED)
        await wait_until(lambda: not alive(first["result"]))
        second = (await client.call_tool("lazy__pid", {})).structured_content
    assert second is not None
    assert second["result"] != first["result"]


async def test_no_child_process_outlives_the_hub(make_settings: MakeSettings) -> None:
    settings = make_settings({"one": stdio(name="one"), "two": stdio(name="two"), "three": stdio("garbage", "three")})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        pids = [(await client.call_tool(f"{s}__pid", {})).structured_content for s in ("one", "two", "three")]
        assert len(live_children()) >= 3
        del hub
    assert all(p is not None for p in pids)
    assert [p for p in pids if p is not None and alive(p["result"])] == []
    assert live_children() == []


async def test_cancelling_the_hub_while_a_server_starts_ends_promptly(make_settings: MakeSettings) -> None:
    settings = make_settings({"stuck": stdio("hang", "stuck"), "alpha": inproc("alpha")})
    hubs: list[Hub] = []
    with anyio.fail_after(20), anyio.CancelScope() as scope:
        async with Hub.open(settings) as hub:
            hubs.append(hub)
            await wait_until(lambda: hub.pool.get("stuck").state is State.STARTING)
            scope.cancel()
            await anyio.sleep_forever()
    assert hubs[0].pool.get("stuck").state is State.STOPPED


async def test_a_call_arriving_while_a_server_is_told_to_stop_gets_a_fresh_process(make_settings: MakeSettings) -> None:
    # The cap and the idle reaper stop a server between its calls; a call landing before the old process has
    # wound down must wait for it and start a new one, not be sent to the dying connection and lost.
    settings = make_settings({"worker": stdio(name="worker"), "alpha": inproc("alpha")})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await hub.wait_discovered()
        first = (await client.call_tool("worker__pid", {})).structured_content
        assert first is not None
        supervisor = hub.pool.get("worker")
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("worker__echo", {"text": "still served"}))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(supervisor.stop)
                await anyio.lowlevel.checkpoint()  # stop() has begun; the old process is still winding down
                assert alive(first["result"])
                tg.start_soon(call)
        second = (await client.call_tool("worker__pid", {})).structured_content
        starts = supervisor.starts
    assert not results[0].is_error, text_of(results[0])
    assert text_of(results[0]) == "still served"
    assert starts == 2
    assert second is not None
    assert first["result"] != second["result"]
