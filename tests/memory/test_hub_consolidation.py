"""Consolidation through a real hub: on demand (the ``consolidate`` tool, the caller's own scopes only) and on the
hub's schedule (``memory.consolidate_every``), with the persistent ChromaDB store and the hashing embedder."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
from mcp import Client

from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.backends.supervisor import State
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.memory_mount import PROJECT_KEY
from hanzo_hub.hub.server import build_server
from tests.conftest import Connect, MakeSettings
from tests.memory._hub import MEMORY, SERVERS, call

OLD = "the staging database runs on port 5432"
NEW = "the staging database runs on port 5433"  # a changed fact: cosine above 0.8 with OLD under the hashing embedder


async def test_consolidate_on_demand_supersedes_the_older_of_two_near_duplicates(
    connect: Connect, make_settings: MakeSettings
) -> None:
    settings = make_settings(SERVERS, memory={**MEMORY, "duplicate_cosine": 0.8})
    other = {"_meta": {PROJECT_KEY: "other"}}
    async with connect(settings) as client:
        old = await call(client, "remember", {"content": OLD})
        await anyio.sleep(0.01)  # a later creation time: the newer fact wins
        new = await call(client, "remember", {"content": NEW})
        elsewhere = await call(client, "remember", {"content": OLD}, meta=other["_meta"])
        await anyio.sleep(0.01)
        await call(client, "remember", {"content": NEW}, meta=other["_meta"])  # the same pair in another project
        report = await call(client, "consolidate", {})
        again = await call(client, "consolidate", {})
        listing = await call(client, "list_memories", {})
        recalled = await call(client, "recall", {"query": "staging database port"})
        untouched = await call(client, "list_memories", {}, meta=other["_meta"])
    assert report["superseded"] == [old["id"]]
    assert "generalize: no LLM configured" in report["skipped"]
    assert again["superseded"] == []
    kept = {m["id"]: m for m in listing["memories"]}
    assert kept[old["id"]]["superseded_by"] == new["id"]  # kept, not deleted: the change stays auditable
    assert [r["memory"]["id"] for r in recalled["results"]] == [new["id"]]
    theirs = {m["id"]: m["superseded_by"] for m in untouched["memories"]}
    assert theirs[elsewhere["id"]] is None  # another project's pair is not the caller's to consolidate


async def test_the_hub_consolidates_on_its_schedule(make_settings: MakeSettings) -> None:
    settings = make_settings(SERVERS, memory={**MEMORY, "duplicate_cosine": 0.8, "consolidate_every": 0.2})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        old = await call(client, "remember", {"content": OLD})
        await anyio.sleep(0.01)
        new = await call(client, "remember", {"content": NEW})

        async def superseded() -> Any:
            listing = await call(client, "list_memories", {})
            return {m["id"]: m["superseded_by"] for m in listing["memories"]}.get(old["id"])

        with anyio.fail_after(10):
            while await superseded() is None:  # noqa: ASYNC110 - a schedule, observed through the tools
                await anyio.sleep(0.1)
        assert await superseded() == new["id"]


async def test_an_older_hubs_snapshot_of_the_memory_server_does_not_hide_its_new_tools(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(SERVERS, memory=MEMORY)
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await call(client, "list_memories", {})  # the memory server has run: its live lists are its snapshot
    store = SnapshotStore(settings.snapshot_dir)
    stored = store.load("memory")
    assert stored is not None
    store.save("memory", dataclasses.replace(stored, tools=tuple(t for t in stored.tools if t.name != "consolidate")))
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert hub.pool.get("memory").state is State.STOPPED  # listed from code, nothing started or opened
    assert "memory__consolidate" in names
