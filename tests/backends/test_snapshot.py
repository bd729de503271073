"""Snapshots: atomic per-server files that let a fresh hub answer lists without starting any server."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.snapshot import SnapshotStore, file_key
from hanzo_hub.backends.supervisor import State
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.naming import NAME_PATTERN
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc, live_children, stdio

NEVER_STARTS = "/nonexistent/hanzo-hub-test/this-server-must-not-start"


def sample_listing(tools: int = 2) -> Listing:
    return Listing(
        tools=tuple(
            types.Tool(name=f"tool{i}", description=f"tool number {i}", input_schema={"type": "object"})
            for i in range(tools)
        ),
        resources=(types.Resource(name="doc", uri="fixture://doc"),),
        templates=(types.ResourceTemplate(name="item", uri_template="fixture://items/{item}"),),
        prompts=(types.Prompt(name="greet"),),
        server_info={"name": "sample", "version": "1"},
        instructions="be nice",
    )


def test_a_saved_listing_loads_back_equal(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "snapshots")
    listing = sample_listing()
    store.save("my.server", listing)
    loaded = store.load("my.server")
    assert loaded is not None
    assert loaded.source == "snapshot"
    assert loaded.content_hash() == listing.content_hash()
    assert loaded.tools == listing.tools
    assert loaded.instructions == "be nice"
    assert not list((tmp_path / "snapshots").glob("*.tmp"))


def test_missing_unreadable_or_foreign_snapshots_load_as_none(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    assert store.load("absent") is None
    store.path_for("corrupt").write_text("{half a file", encoding="utf-8")
    assert store.load("corrupt") is None
    store.save("other", sample_listing())
    store.path_for("impostor").write_text(store.path_for("other").read_text(encoding="utf-8"), encoding="utf-8")
    assert store.load("impostor") is None
    body = json.loads(store.path_for("other").read_text(encoding="utf-8"))
    store.path_for("future").write_text(json.dumps({**body, "server": "future", "format": 99}), encoding="utf-8")
    assert store.load("future") is None
    store.path_for("malformed").write_text(json.dumps({"format": 1, "server": "malformed"}), encoding="utf-8")
    assert store.load("malformed") is None


def test_file_keys_differ_for_names_that_sanitize_alike() -> None:
    names = ["a.b", "a/b", "a b", "a-b", "A-B", "x" * 300, "x" * 301]
    keys = {file_key(n) for n in names}
    assert len(keys) == len(names)
    assert all(len(k) < 64 for k in keys)


def test_an_unwritable_snapshot_directory_is_logged_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    SnapshotStore(blocker / "snapshots").save("s", sample_listing())  # mkdir fails; the hub carries on


async def test_a_second_hub_answers_from_snapshots_without_starting_servers(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Hub.open(settings) as first, Client(build_server(first)) as client:
        expected = [tool.name for tool in (await client.list_tools()).tools]
    async with Hub.open(settings) as second, Client(build_server(second)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
        states = {sup.state for sup in second.pool.supervisors.values()}
        starts = sum(sup.starts for sup in second.pool.supervisors.values())
    assert names == expected
    assert prompts == ["alpha__greet", "beta__greet"]
    assert states == {State.STOPPED}
    assert starts == 0


async def test_a_list_change_is_saved_for_the_next_hub(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Hub.open(settings) as first, Client(build_server(first)) as client:
        await client.call_tool("alpha__grow", {})
        await first.pool.get("alpha").request(lambda c: c.list_tools())
    stored = SnapshotStore(settings.snapshot_dir).load("alpha")
    assert stored is not None
    assert "extra" in {tool.name for tool in stored.tools}


@pytest.mark.integration
async def test_snapshots_spare_subprocess_starts(
    make_settings: MakeSettings, no_leaked_children: None, fixture_tools: set[str]
) -> None:
    settings = make_settings({"one": stdio(name="one"), "two": stdio(name="two")})
    async with Hub.open(settings) as first:
        await first.wait_discovered()
        expected = [tool.name for tool in first.registry.tools()]
        assert len(live_children()) >= 2
    assert len(expected) == 2 * len(fixture_tools)
    async with Hub.open(settings) as second, Client(build_server(second)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert live_children() == []
        assert {sup.starts for sup in second.pool.supervisors.values()} == {0}
    assert names == expected


async def test_300_servers_answer_3000_tools_from_snapshots_without_starting_any(make_settings: MakeSettings) -> None:
    servers = {f"svc-{i:03d}.example": {"command": NEVER_STARTS, "args": [str(i)]} for i in range(300)}
    settings = make_settings(servers, exposure={"mode": "all"})  # 'auto' would list find_tools for 3,000 tools
    store = SnapshotStore(settings.snapshot_dir)
    for name in servers:
        store.save(name, sample_listing(tools=10))
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        tools = (await client.list_tools()).tools
        states = {sup.state for sup in hub.pool.supervisors.values()}
        starts = sum(sup.starts for sup in hub.pool.supervisors.values())
        failures = sum(sup.failures for sup in hub.pool.supervisors.values())
    names = [tool.name for tool in tools]
    assert len(names) == 3000
    assert len(set(names)) == 3000
    assert all(NAME_PATTERN.match(name) for name in names)
    assert states == {State.STOPPED}
    assert starts == 0
    assert failures == 0
