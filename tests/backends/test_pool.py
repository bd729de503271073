"""The pool with in-process servers: the running cap with LRU eviction, the idle reaper, the breaker, shutdown."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.backends.supervisor import State
from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from hanzo_hub.hub.status import health
from tests.conftest import MakeSettings, inproc, stdio, text_of, wait_until

ECHO = types.Tool(name="echo", input_schema={"type": "object"})


async def seed(settings: HubSettings) -> None:
    """Run a hub once so every server has a snapshot; later hubs start servers only on demand."""
    async with Hub.open(settings) as hub:
        await hub.wait_discovered()


def states(hub: Hub) -> dict[str, State]:
    return {name: sup.state for name, sup in hub.pool.supervisors.items()}


async def beta_while_alpha_sleeps(
    hub: Hub, client: Client, seconds: float, text: str, meanwhile: Callable[[], Awaitable[None]] | None = None
) -> dict[str, types.CallToolResult]:
    """``alpha__sleep`` for ``seconds``, and once it is in flight ``beta__echo`` (then ``meanwhile``); both results."""
    results: dict[str, types.CallToolResult] = {}

    async def call(name: str, arguments: dict[str, Any]) -> None:
        results[name] = await client.call_tool(name, arguments)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "alpha__sleep", {"seconds": seconds})
            await wait_until(lambda: hub.pool.get("alpha").in_flight == 1)
            tg.start_soon(call, "beta__echo", {"text": text})
            if meanwhile is not None:
                await meanwhile()
    return results


async def test_servers_start_lazily_on_first_call(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    await seed(settings)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.list_tools()
        assert states(hub) == {"alpha": State.STOPPED, "beta": State.STOPPED}
        await client.call_tool("beta__echo", {"text": "wake up"})
        assert states(hub) == {"alpha": State.STOPPED, "beta": State.RUNNING}


async def test_the_running_cap_evicts_the_least_recently_used_idle_server(make_settings: MakeSettings) -> None:
    servers = {"alpha": inproc("alpha"), "beta": inproc("beta"), "gamma": inproc("gamma")}
    await seed(make_settings(servers))
    settings = make_settings(servers, backends={"max_running": 2})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.call_tool("alpha__echo", {"text": "1"})
        await client.call_tool("beta__echo", {"text": "2"})
        await client.call_tool("alpha__echo", {"text": "3"})  # beta is now the least recently used
        await anyio.sleep(0.2)  # both idle for longer than their (in-process) starts took: either may go
        result = await client.call_tool("gamma__echo", {"text": "4"})
        assert states(hub) == {"alpha": State.RUNNING, "beta": State.STOPPED, "gamma": State.RUNNING}
        assert len(hub.pool.running) == 2
        await anyio.sleep(0.2)
        await client.call_tool("beta__echo", {"text": "5"})  # alpha is now the least recently used
        assert states(hub) == {"alpha": State.STOPPED, "beta": State.RUNNING, "gamma": State.RUNNING}
    assert text_of(result) == "4"


async def test_a_server_idle_for_less_than_its_start_took_is_not_evicted_first(make_settings: MakeSettings) -> None:
    # A subprocess server takes a good part of a second to start, an in-process one milliseconds. Evicting the
    # subprocess one the moment it went idle, to start another, would pay its start again on its next call.
    servers = {"slow": stdio(name="slow"), "alpha": inproc("alpha"), "beta": inproc("beta")}
    await seed(make_settings(servers))
    settings = make_settings(servers, backends={"max_running": 2})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.call_tool("slow__echo", {"text": "1"})
        slow = hub.pool.get("slow")
        assert slow.start_cost > 0.05
        await client.call_tool("alpha__echo", {"text": "2"})  # slow is now the least recently used, but fresh
        result = await client.call_tool("beta__echo", {"text": "3"})
        assert states(hub) == {"slow": State.RUNNING, "alpha": State.STOPPED, "beta": State.RUNNING}
        assert slow.starts == 1
    assert text_of(result) == "3"


async def test_a_busy_server_is_not_evicted_and_the_waiter_gets_its_slot(make_settings: MakeSettings) -> None:
    servers = {"alpha": inproc("alpha"), "beta": inproc("beta")}
    await seed(make_settings(servers))
    settings = make_settings(servers, backends={"max_running": 1})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:

        async def meanwhile() -> None:
            await wait_until(lambda: hub.pool.get("beta").state is State.STARTING)
            assert hub.pool.get("alpha").state is State.RUNNING  # in flight: never evicted

        results = await beta_while_alpha_sleeps(hub, client, 0.5, "after alpha", meanwhile)
    assert text_of(results["alpha__sleep"]) == "slept 0.5"
    assert text_of(results["beta__echo"]) == "after alpha"


async def test_a_start_waiting_for_a_slot_is_bounded_by_the_call_timeout(make_settings: MakeSettings) -> None:
    servers = {"alpha": inproc("alpha"), "beta": inproc("beta", call_timeout=0.3)}
    await seed(make_settings(servers))
    settings = make_settings(servers, backends={"max_running": 1})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        results = await beta_while_alpha_sleeps(hub, client, 1.5, "never")
        beta = hub.pool.get("beta")
        assert beta.state is State.STOPPED
        assert beta.starts == 0
    assert text_of(results["alpha__sleep"]) == "slept 1.5"
    assert results["beta__echo"].is_error
    assert "no running slot came free within 0.3 s (max_running = 1)" in text_of(results["beta__echo"])


async def test_a_server_removed_while_its_start_is_queued_never_starts(make_settings: MakeSettings) -> None:
    servers = {"alpha": inproc("alpha"), "beta": inproc("beta")}
    await seed(make_settings(servers))
    settings = make_settings(servers, backends={"max_running": 1, "shutdown_timeout": 5})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        beta = hub.pool.get("beta")
        took: list[float] = []

        async def remove_beta_once_queued() -> None:
            await wait_until(lambda: beta.state is State.STARTING)
            began = anyio.current_time()
            await hub.pool.remove("beta")  # what a reloaded config without beta does
            took.append(anyio.current_time() - began)

        results = await beta_while_alpha_sleeps(hub, client, 0.5, "never", remove_beta_once_queued)
        assert beta.starts == 0
        assert beta.state is State.STOPPED
        assert {s.name for s in hub.pool.running} == {"alpha"}
    assert took[0] < 1  # not the shutdown timeout: nothing was running yet
    assert text_of(results["alpha__sleep"]) == "slept 0.5"
    assert results["beta__echo"].is_error
    assert "'beta'" in text_of(results["beta__echo"])
    assert "stopped before it started" in text_of(results["beta__echo"])


async def test_a_server_removed_while_it_installs_never_starts(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, backends={"shutdown_timeout": 5})
    await seed(settings)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        beta = hub.pool.get("beta")
        installing, installed = anyio.Event(), anyio.Event()
        results: list[types.CallToolResult] = []

        async def slow_install(server: str) -> None:  # stands in for building a catalog env on first use
            installing.set()
            await installed.wait()

        async def call() -> None:
            results.append(await client.call_tool("beta__echo", {"text": "never"}))

        monkeypatch.setattr(hub, "prepare_start", slow_install)
        with anyio.fail_after(3):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await installing.wait()
                tg.start_soon(hub.pool.remove, "beta")
                await wait_until(lambda: beta.retired)
                installed.set()
        assert beta.starts == 0
        assert beta.state is State.STOPPED
    assert "stopped before it started" in text_of(results[0])


async def test_an_idle_server_is_stopped_and_restarted_on_demand(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, backends={"idle_timeout": 0.2})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.call_tool("alpha__echo", {"text": "x"})
        alpha = hub.pool.get("alpha")
        await wait_until(lambda: alpha.state is State.STOPPED)
        result = await client.call_tool("alpha__echo", {"text": "back"})
        assert alpha.starts == 2
    assert text_of(result) == "back"


async def test_the_breaker_opens_after_consecutive_failures_and_fails_fast(make_settings: MakeSettings) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha"), "kaputt": inproc("broken")},
        backends={"breaker_threshold": 2, "restart_backoff": 0.01, "breaker_cooldown": 600},
    )
    SnapshotStore(settings.snapshot_dir).save("kaputt", Listing(tools=(ECHO,)))
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        first = await client.call_tool("kaputt__echo", {})
        second = await client.call_tool("kaputt__echo", {})
        third = await client.call_tool("kaputt__echo", {})
        kaputt = hub.pool.get("kaputt")
        report = health(hub)
        still_fine = await client.call_tool("alpha__echo", {"text": "ok"})
    assert all(r.is_error and "'kaputt'" in text_of(r) for r in (first, second, third))
    assert "could not start" in text_of(first)
    assert "2 consecutive failures" in text_of(third)
    assert kaputt.starts == 2  # the third call never tried
    assert report["detail"]["kaputt"]["circuit_open"] is True
    assert "broken fixture refuses to start" in report["detail"]["kaputt"]["last_error"]
    assert text_of(still_fine) == "ok"


async def test_the_breaker_lets_a_call_through_after_its_cooldown(make_settings: MakeSettings) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha"), "kaputt": inproc("broken")},
        backends={"breaker_threshold": 1, "restart_backoff": 0.01, "breaker_cooldown": 0.05},
    )
    SnapshotStore(settings.snapshot_dir).save("kaputt", Listing(tools=(ECHO,)))
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.call_tool("kaputt__echo", {})
        kaputt = hub.pool.get("kaputt")
        await wait_until(lambda: not kaputt.status()["circuit_open"])
        again = await client.call_tool("kaputt__echo", {})
    assert kaputt.starts == 2
    assert "could not start" in text_of(again)


async def test_a_successful_call_resets_the_failure_count(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.call_tool("alpha__echo", {"text": "x"})
        assert hub.pool.get("alpha").status()["failures"] == 0


async def test_discovery_is_not_held_up_by_a_broken_server(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "kaputt": inproc("broken")})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert "alpha__echo" in names
    assert not any(name.startswith("kaputt__") for name in names)


async def test_leaving_the_hub_stops_every_server(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta"), "gamma": inproc("gamma")})
    async with Hub.open(settings) as hub:
        await hub.wait_discovered()
        assert set(states(hub).values()) == {State.RUNNING}
    assert set(states(hub).values()) == {State.STOPPED}
    assert hub.pool.running == set()


async def test_a_cancelled_hub_still_stops_every_server(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    hub_ref: list[Hub] = []
    with anyio.move_on_after(5) as scope:
        async with Hub.open(settings) as hub:
            hub_ref.append(hub)
            await hub.wait_discovered()
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert set(states(hub_ref[0]).values()) == {State.STOPPED}
