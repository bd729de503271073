from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from mcp import Client

from hanzo_hub.memory import MemoryScope, MemoryService

WORDS = [
    "apple",
    "river",
    "mountain",
    "violin",
    "python",
    "garden",
    "rocket",
    "coffee",
    "winter",
    "lantern",
    "harbor",
    "maple",
    "quartz",
]


async def test_tools_are_listed_with_resource_templates(server_for: Callable[[MemoryScope], Any]) -> None:
    async with Client(server_for(MemoryScope("u", "p"))) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert names == {"remember", "recall", "list_memories", "update_memory", "forget", "export_memories",
                     "import_memories", "consolidate"}  # fmt: skip
    assert templates == {"memory://{tier}/entries", "memory://{tier}/entries/{memory_id}"}


async def test_remember_recall_update_forget_roundtrip(server_for: Callable[[MemoryScope], Any]) -> None:
    async with Client(server_for(MemoryScope("u", "p"))) as client:
        made = (
            await client.call_tool("remember", {"content": "the deploy key lives in vault slot 7"})
        ).structured_content
        assert made is not None
        await client.call_tool("remember", {"content": "coffee order is a flat white", "tier": "global"})
        got = (await client.call_tool("recall", {"query": "where is the deploy key"})).structured_content
        assert got is not None
        assert got["results"][0]["memory"]["id"] == made["id"]
        assert "project tier" in got["results"][0]["why"]
        upd = await client.call_tool("update_memory", {"memory_id": made["id"], "content": "deploy key: slot 9"})
        assert upd.structured_content is not None
        assert upd.structured_content["content"] == "deploy key: slot 9"
        listed = (await client.call_tool("list_memories", {"tier": "project"})).structured_content
        assert listed is not None
        assert listed["total"] == 1
        res = await client.read_resource(f"memory://project/entries/{made['id']}")
        assert json.loads(res.contents[0].text)["content"] == "deploy key: slot 9"  # type: ignore[union-attr]
        listing = await client.read_resource("memory://global/entries")
        assert len(json.loads(listing.contents[0].text)) == 1  # type: ignore[union-attr]
        exported = (await client.call_tool("export_memories", {})).structured_content
        assert exported is not None
        assert exported["count"] == 2
        gone = (await client.call_tool("forget", {"all": True})).structured_content
        assert gone is not None
        assert len(gone["forgotten"]) == 2
        imported = (await client.call_tool("import_memories", {"jsonl": exported["jsonl"]})).structured_content
        assert imported is not None
        assert imported["total"] == 2
        by_filter = (await client.call_tool("forget", {"contains": "coffee"})).structured_content
        assert by_filter is not None
        assert len(by_filter["forgotten"]) == 1


async def test_no_query_listing_resource_or_export_leaks_across_users_and_projects(
    server_for: Callable[[MemoryScope], Any],
) -> None:
    rng = random.Random(8)
    scopes = [MemoryScope(u, p) for u in ("alice", "bob") for p in ("p1", "p2")]
    owned: dict[MemoryScope, set[str]] = {s: set() for s in scopes}
    for scope in scopes:
        async with Client(server_for(scope)) as client:
            for _ in range(15):
                text = " ".join(rng.choices(WORDS, k=5)) + f" {scope.user}-{scope.project}"
                tier = rng.choice(["project", "global", "session"])
                made = (await client.call_tool("remember", {"content": text, "tier": tier})).structured_content
                assert made is not None
                owned[scope].add(made["id"])
    global_of = {u: {i for s in scopes if s.user == u for i in owned[s]} for u in ("alice", "bob")}
    for scope in scopes:
        allowed = owned[scope] | global_of[scope.user]  # global tier is per user, shared across projects
        async with Client(server_for(scope)) as client:
            for _ in range(40):
                got = await client.call_tool("recall", {"query": " ".join(rng.choices(WORDS, k=3))})
                assert got.structured_content is not None
                ids = {r["memory"]["id"] for r in got.structured_content["results"]}
                assert ids <= allowed
            listed = (await client.call_tool("list_memories", {"limit": 200})).structured_content
            assert listed is not None
            assert {m["id"] for m in listed["memories"]} <= allowed
            exported = (await client.call_tool("export_memories", {})).structured_content
            assert exported is not None
            lines = [json.loads(x) for x in exported["jsonl"].splitlines()]
            assert all(x["user"] == scope.user for x in lines)
            assert all(x["project"] in (scope.project, "") for x in lines)
            for other in scopes:
                if other.user != scope.user:
                    for mid in owned[other]:
                        res = await client.call_tool("update_memory", {"memory_id": mid, "content": "x"})
                        assert res.is_error
                    gone = await client.call_tool("forget", {"all": True, "contains": other.user})
                    assert gone.structured_content is not None
                    assert gone.structured_content["forgotten"] == []


async def test_session_summarizes_oldest_third_into_project_facts(
    service: MemoryService, server_for: Callable[[MemoryScope], Any]
) -> None:
    scope = MemoryScope("u", "p", "s1")
    budget = service.settings.session_token_budget
    async with Client(server_for(scope)) as client:
        await client.call_tool("remember", {"content": "My dog is named Biscuit and he is 4 years old.",
                                            "tier": "session"})  # fmt: skip
        filler = "we talked about the weather and other small things at length. " * 40
        for _ in range(int(budget * 0.8 / (len(filler) // 4)) + 1):
            await client.call_tool("remember", {"content": filler, "tier": "session"})
        got = await client.call_tool("recall", {"query": "what is my dog named", "tier": "project"})
    assert got.structured_content is not None
    assert any("Biscuit" in r["memory"]["content"] for r in got.structured_content["results"])
    index = await service.store.scope(scope.key("session"))
    assert sum(e.tokens for e in index.entries.values()) <= budget
