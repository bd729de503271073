"""Memory through a real hub and real MCP clients: in-memory, streamable HTTP and stdio, both protocol eras.

Every tool and the listing resource are used the way a client would: through ``hanzo-hub``'s front server, with
the hub (not the client) deciding the scope. The project comes from the client's MCP roots (handshake era) or an
explicit ``_meta`` id; stateless-era clients are never asked for roots.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.hub.core import Hub, is_modern
from hanzo_hub.hub.memory_mount import PROJECT_KEY
from hanzo_hub.hub.server import build_server
from tests.conftest import Connect, MakeSettings, text_of
from tests.memory._hub import MEMORY, SERVERS, call, exported, listed, read_listing, recalled, roots_callback


async def test_every_memory_tool_through_the_hub(connect: Connect, make_settings: MakeSettings) -> None:
    settings = make_settings(SERVERS, memory=MEMORY)
    async with connect(settings) as client:
        kept = await call(client, "remember", {"content": "The staging database runs on port 5433", "tags": ["db"]})
        await call(client, "remember", {"content": "Alice prefers tabs over spaces", "tier": "global"})
        found = await call(client, "recall", {"query": "which port does the staging database use"})
        everything = await call(client, "list_memories", {})
        changed = await call(client, "update_memory", {"memory_id": kept["id"], "content": "Staging DB: port 6543"})
        dump = await call(client, "export_memories", {})
        resource = await read_listing(client, "project")
        gone = await call(client, "forget", {"memory_id": kept["id"]})
        after = await call(client, "list_memories", {"tier": "project"})
        await call(client, "forget", {"all": True, "tier": "global"})
        back = await call(client, "import_memories", {"jsonl": dump["jsonl"]})
        final = await call(client, "list_memories", {})
        refused = await client.call_tool("memory__forget", {})
    assert recalled(found)[0] == "The staging database runs on port 5433"
    assert "project" in found["results"][0]["why"]
    assert sorted(listed(everything)) == ["Alice prefers tabs over spaces", "The staging database runs on port 5433"]
    assert changed["content"] == "Staging DB: port 6543"
    assert sorted(exported(dump)) == ["Alice prefers tabs over spaces", "Staging DB: port 6543"]
    assert resource == ["Staging DB: port 6543"]
    assert gone["forgotten"] == [kept["id"]]
    assert listed(after) == []
    assert back["total"] == 2
    assert sorted(listed(final)) == ["Alice prefers tabs over spaces", "Staging DB: port 6543"]
    assert refused.is_error
    assert "memory_id" in text_of(refused)


async def test_explicit_project_scopes_every_read(connect: Connect, make_settings: MakeSettings) -> None:
    settings = make_settings(SERVERS, memory=MEMORY)
    here, there = {PROJECT_KEY: "here"}, {PROJECT_KEY: "there"}
    async with connect(settings) as client:
        await call(client, "remember", {"content": "written in project here"}, meta=here)
        await call(client, "remember", {"content": "written in project there"}, meta=there)
        mine = await call(client, "recall", {"query": "written in project"}, meta=here)
        theirs = await call(client, "list_memories", {}, meta=there)
        default = await call(client, "list_memories", {})
        resource = await read_listing(client, "project", meta=here)
    assert recalled(mine) == ["written in project here"]
    assert listed(theirs) == ["written in project there"]
    assert listed(default) == []
    assert resource == ["written in project here"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_project_comes_from_the_first_root(make_settings: MakeSettings, tmp_path: Path, mode: str) -> None:
    """Handshake-era clients are asked for roots; stateless-era ones get the default project unless ``_meta``."""
    settings = make_settings(SERVERS, memory=MEMORY)
    repo = tmp_path / "repo"
    repo.mkdir()
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        async with Client(server, mode=mode, list_roots_callback=roots_callback(repo.as_uri())) as client:
            await call(client, "remember", {"content": "the release checklist lives in docs"})
            modern = is_modern(client)
        # The same folder named differently is the same project; a client without roots sees the default project.
        same = roots_callback(f"file://{repo}/../repo/")
        async with Client(server, mode="legacy", list_roots_callback=same) as again, Client(server) as plain:
            via_root = await call(again, "list_memories", {})
            default = await call(plain, "list_memories", {})
    if modern:
        assert listed(via_root) == []
        assert listed(default) == ["the release checklist lives in docs"]
    else:
        assert listed(via_root) == ["the release checklist lives in docs"]
        assert listed(default) == []


@pytest.mark.filterwarnings("ignore:The roots capability is deprecated:mcp.shared.exceptions.MCPDeprecationWarning")
async def test_roots_list_changed_moves_the_client_to_the_new_project(
    make_settings: MakeSettings, tmp_path: Path
) -> None:
    settings = make_settings(SERVERS, memory=MEMORY)
    roots = {"uri": (tmp_path / "one").as_uri()}

    async def answer(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=roots["uri"], name="workspace")])

    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy", list_roots_callback=answer) as c:
        await call(c, "remember", {"content": "a fact about project one"})
        roots["uri"] = (tmp_path / "two").as_uri()
        cached = await call(c, "list_memories", {})  # no notification yet: still project one
        await c.session.send_roots_list_changed()
        with anyio.fail_after(5):
            while listed(await call(c, "list_memories", {})):  # noqa: ASYNC110 - the notification has no reply
                await anyio.sleep(0.02)
        await call(c, "remember", {"content": "a fact about project two"})
        now = await call(c, "list_memories", {})
    assert listed(cached) == ["a fact about project one"]
    assert listed(now) == ["a fact about project two"]


async def test_a_client_that_never_answers_roots_gets_the_default_project(make_settings: MakeSettings) -> None:
    settings = make_settings(SERVERS, memory=MEMORY)

    async def never(context: Any) -> types.ListRootsResult:
        await anyio.sleep_forever()
        raise AssertionError

    async with Hub.open(settings) as hub:
        hub.projects.timeout = 0.3
        async with Client(build_server(hub), mode="legacy", list_roots_callback=never) as client:
            with anyio.fail_after(5):
                await call(client, "remember", {"content": "written while roots hang"})
                with anyio.fail_after(0.25):  # the failure is cached: no second wait
                    second = await call(client, "list_memories", {})
        async with Client(build_server(hub), mode="legacy") as plain:
            default = await call(plain, "list_memories", {})
    assert listed(second) == ["written while roots hang"]
    assert listed(default) == ["written while roots hang"]
