"""The session tier through a real hub: one random id per client connection, and the tier gone when the connection
is (its often-read memories promoted to the project first)."""

from __future__ import annotations

import gc

import anyio
from mcp import Client

from hanzo_hub.backends.supervisor import State
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.memory_mount import SESSION_KEY
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, wait_until
from tests.memory._hub import MEMORY, SERVERS, call, listed, session_scopes


async def test_a_closed_connection_takes_its_session_tier_and_promotes_what_it_read_often(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(SERVERS, memory=MEMORY)
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        async with Client(server, mode="legacy") as first:
            await call(first, "remember", {"content": "the release train leaves on thursdays", "tier": "session"})
            await call(first, "remember", {"content": "lunch is at noon today", "tier": "session"})
            for _ in range(4):
                await call(first, "recall", {"query": "when does the release train leave", "tier": "session"})
            assert len(session_scopes(hub)) == 1
        gc.collect()
        await wait_until(lambda: session_scopes(hub) == [])
        async with Client(server, mode="legacy") as second:
            project = await call(second, "list_memories", {"tier": "project"})
            session = await call(second, "list_memories", {"tier": "session"})
    assert listed(project) == ["the release train leaves on thursdays"]  # read 4 times: promoted as its session ended
    assert listed(session) == []


async def test_every_connection_gets_a_session_of_its_own(make_settings: MakeSettings) -> None:
    settings = make_settings(SERVERS, memory=MEMORY)
    sources: list[str] = []
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        for n in range(12):
            async with Client(server, mode="legacy") as client:
                made = await call(client, "remember", {"content": f"note number {n}", "tier": "session"})
                seen = await call(client, "list_memories", {"tier": "session"})
                assert listed(seen) == [f"note number {n}"]  # never an earlier connection's session memories
                sources.append(made["source"])
            gc.collect()
    assert len(set(sources)) == len(sources)


async def test_a_stateless_request_is_its_own_session_and_leaves_nothing_behind(make_settings: MakeSettings) -> None:
    # A 2026-07-28 client has no connection across requests: each request's session tier ends with the request.
    settings = make_settings(SERVERS, memory=MEMORY)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        made = [await call(client, "remember", {"content": f"scratch {n}", "tier": "session"}) for n in range(3)]
        seen = await call(client, "list_memories", {"tier": "session"})
        await wait_until(lambda: session_scopes(hub) == [])
    assert len({m["source"] for m in made}) == 3
    assert listed(seen) == []


async def test_the_memory_server_outlives_its_idle_timeout_while_a_session_keeps_memories(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(SERVERS, memory=MEMORY, backends={"idle_timeout": 0.2})
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        memory = hub.pool.get("memory")
        async with Client(server, mode="legacy") as client:
            await call(client, "remember", {"content": "the build is red", "tier": "session"})
            await anyio.sleep(1.0)  # five idle timeouts: a stop now would lose the session tier
            assert memory.state is State.RUNNING
            seen = await call(client, "list_memories", {"tier": "session"})
        gc.collect()
        await wait_until(lambda: memory.state is State.STOPPED)  # the session is gone: idle reaping applies again
    assert listed(seen) == ["the build is red"]


async def test_sessions_still_open_when_the_hub_stops_promote_what_they_read_often(make_settings: MakeSettings) -> None:
    # A stdio client's session ends as the hub does: the stopping memory server promotes before its store closes.
    settings = make_settings(SERVERS, memory=MEMORY)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        await call(client, "remember", {"content": "the on-call phone is in drawer two", "tier": "session"})
        for _ in range(4):
            await call(client, "recall", {"query": "where is the on-call phone", "tier": "session"})
        await hub.pool.get("memory").stop()  # the store closes with the session still open
        assert hub.pool.get("memory").state is State.STOPPED
        project = await call(client, "list_memories", {"tier": "project"})  # the server starts again
    assert listed(project) == ["the on-call phone is in drawer two"]


async def test_a_stateless_client_may_name_its_session_and_it_ends_once_idle(make_settings: MakeSettings) -> None:
    memory = {**MEMORY, "consolidate_every": 0.2, "session_idle_timeout": 1.0}
    settings = make_settings(SERVERS, memory=memory)
    named = {SESSION_KEY: "conversation-7"}
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        async with Client(server, mode="auto") as client:
            await call(client, "remember", {"content": "the user wants short answers", "tier": "session"}, meta=named)
            same = await call(client, "list_memories", {"tier": "session"}, meta=named)
            other = await call(client, "list_memories", {"tier": "session"}, meta={SESSION_KEY: "conversation-8"})
            unnamed = await call(client, "list_memories", {"tier": "session"})
        async with Client(server, mode="legacy") as legacy:  # a connection is its own session: a name changes nothing
            ignored = await call(legacy, "list_memories", {"tier": "session"}, meta=named)
        assert "named:conversation-7" in session_scopes(hub)
        await wait_until(lambda: "named:conversation-7" not in session_scopes(hub))  # idle past the timeout
    assert listed(same) == ["the user wants short answers"]
    assert listed(other) == listed(unnamed) == listed(ignored) == []
