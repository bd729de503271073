"""No answer of the hub's memory ever contains another project's or another user's memories.

Randomized memories are written into several scopes through real clients, then every read path (recall with many
queries, list, export, the listing resource) is checked from each scope: every memory returned must carry that
scope's marker, and each scope must still find its own memories (so the check cannot pass by returning nothing).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from hanzo_hub.hub.memory_mount import PROJECT_KEY, SESSION_KEY
from hanzo_hub.transports.auth import token_digest
from tests.conftest import Connect, MakeSettings, serve_http_in_process
from tests.memory._hub import (
    MEMORY,
    SERVERS,
    call,
    exported,
    listed,
    memories_for,
    read_listing,
    recalled,
    roots_callback,
)

PER_SCOPE = 12
QUERIES = 24


async def _write(client: Client, contents: list[str], tier: str = "project", **kwargs: Any) -> None:
    for content in contents:
        await call(client, "remember", {"content": content, "tier": tier}, **kwargs)


async def _check_scope(
    client: Client, marker: str, own: list[str], pool: list[str], rng: random.Random, seed: int, **kwargs: Any
) -> None:
    """Every read from this scope returns only ``marker``'s memories, and finds its own ones."""
    where = f"scope {marker!r}, seed {seed}"
    for query in rng.sample(pool, min(QUERIES, len(pool))):
        got = recalled(await call(client, "recall", {"query": query, "limit": 50}, **kwargs))
        assert all(item.startswith(marker) for item in got), f"recall leaked into {where}: {got}"
        if query in own:
            assert query in got, f"{where} could not recall its own memory {query!r}"
    for words in (" ".join(rng.sample(pool, 3)), "apple river stone"):
        got = recalled(await call(client, "recall", {"query": words, "limit": 50}, **kwargs))
        assert all(item.startswith(marker) for item in got), f"recall leaked into {where}: {got}"
    everything = listed(await call(client, "list_memories", {"limit": 200}, **kwargs))
    assert sorted(everything) == sorted(own), f"list_memories of {where}"
    assert sorted(exported(await call(client, "export_memories", {}, **kwargs))) == sorted(own), f"export of {where}"
    tiers = {"project"} | ({"global"} if any(" global " in item for item in own) else set())
    resource = [item for tier in sorted(tiers) for item in await read_listing(client, tier, **kwargs)]
    assert sorted(resource) == sorted(own), f"resources of {where}"


@pytest.mark.integration
@pytest.mark.parametrize("via", ["roots", "meta"])
async def test_two_projects_never_see_each_other(
    connect: Connect, make_settings: MakeSettings, tmp_path: Path, via: str
) -> None:
    if via == "roots" and connect.mode == "auto":  # type: ignore[attr-defined]
        pytest.skip("stateless-era clients are never asked for roots: their project comes from _meta only")
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    settings = make_settings(SERVERS, memory=MEMORY)
    mem = {"a": memories_for(rng, "proj-a", PER_SCOPE), "b": memories_for(rng, "proj-b", PER_SCOPE)}
    pool = mem["a"] + mem["b"]
    folders = {key: tmp_path / f"work-{key}" for key in mem}

    def scoped(key: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(client kwargs, per-call kwargs) placing a client in project ``key``."""
        if via == "roots":
            return {"list_roots_callback": roots_callback(folders[key].as_uri())}, {}
        return {}, {"meta": {PROJECT_KEY: f"project-{key}"}}

    opened, per_call = scoped("a")
    async with connect(settings, **opened) as client:
        await _write(client, mem["a"], **per_call)
    opened, per_call = scoped("b")
    async with connect(settings, **opened) as client:
        await _write(client, mem["b"], **per_call)
        await _check_scope(client, "proj-b", mem["b"], pool, rng, seed, **per_call)
    opened, per_call = scoped("a")
    async with connect(settings, **opened) as client:
        await _check_scope(client, "proj-a", mem["a"], pool, rng, seed, **per_call)
    async with connect(settings) as client:  # neither roots nor _meta: the default project holds nothing
        assert listed(await call(client, "list_memories", {})) == []


TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_users_over_http_never_see_each_other(make_settings: MakeSettings, mode: str) -> None:
    """Two bearer tokens map to two users; both use the same project name and their global tiers."""
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    auth = {"tokens": [{"user": user, "sha256": token_digest(token)} for user, token in TOKENS.items()]}
    settings = make_settings(SERVERS, memory=MEMORY, auth=auth)
    same_project: dict[str, Any] = {"meta": {PROJECT_KEY: "shared-name"}}
    mem = {
        user: memories_for(rng, f"user-{user} project", PER_SCOPE // 2)
        + memories_for(rng, f"user-{user} global", PER_SCOPE // 2)
        for user in TOKENS
    }
    pool = [item for items in mem.values() for item in items]

    async with serve_http_in_process(settings) as url:

        async def as_user(user: str) -> Any:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[user]}"}, timeout=30)
            return http, Client(streamable_http_client(url, http_client=http), mode=mode)

        for user in TOKENS:
            http, client = await as_user(user)
            async with http, client:
                items = mem[user]
                await _write(client, items[: PER_SCOPE // 2], **same_project)
                await _write(client, items[PER_SCOPE // 2 :], tier="global", **same_project)
        for user in TOKENS:
            http, client = await as_user(user)
            async with http, client:
                await _check_scope(client, f"user-{user}", mem[user], pool, rng, seed, **same_project)
        async with httpx2.AsyncClient(timeout=30) as http:  # no token: no memory at all
            response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert response.status_code == 401


@pytest.mark.integration
async def test_another_users_memory_id_reaches_nothing(make_settings: MakeSettings) -> None:
    """Knowing the id of alice's memory gives bob no way to read, change or delete it."""
    auth = {"tokens": [{"user": user, "sha256": token_digest(token)} for user, token in TOKENS.items()]}
    settings = make_settings(SERVERS, memory=MEMORY, auth=auth)
    async with serve_http_in_process(settings) as url:

        def as_user(user: str) -> tuple[httpx2.AsyncClient, Client]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[user]}"}, timeout=30)
            return http, Client(streamable_http_client(url, http_client=http), mode="legacy")

        http, alice = as_user("alice")
        async with http, alice:
            secret = await call(alice, "remember", {"content": "alice's door code is 4711"})
            templates = (await alice.list_resource_templates()).resource_templates
            (entry,) = [t.uri_template for t in templates if t.uri_template.endswith("{memory_id}")]
            uri = entry.replace("{tier}", "project").replace("{memory_id}", secret["id"])
            own = await alice.read_resource(uri)
        http, bob = as_user("bob")
        async with http, bob:
            changed = await bob.call_tool("memory__update_memory", {"memory_id": secret["id"], "content": "pwned"})
            forgotten = await call(bob, "forget", {"memory_id": secret["id"]})
            with pytest.raises(MCPError):
                await bob.read_resource(uri)
        http, alice = as_user("alice")
        async with http, alice:
            still = await call(alice, "list_memories", {})
    assert secret["id"] in str(own.contents[0])
    assert changed.is_error
    assert forgotten["forgotten"] == []
    assert listed(still) == ["alice's door code is 4711"]


@pytest.mark.integration
async def test_two_users_naming_the_same_session_never_share_it(make_settings: MakeSettings) -> None:
    """Stateless-era clients may name their session; the name lives inside each user's (and project's) scope."""
    auth = {"tokens": [{"user": user, "sha256": token_digest(token)} for user, token in TOKENS.items()]}
    settings = make_settings(SERVERS, memory=MEMORY, auth=auth)
    named: dict[str, Any] = {"meta": {SESSION_KEY: "s1", PROJECT_KEY: "shared-name"}}
    seen: dict[str, list[str]] = {}
    async with serve_http_in_process(settings) as url:
        for user in TOKENS:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[user]}"}, timeout=30)
            async with http, Client(streamable_http_client(url, http_client=http), mode="auto") as client:
                await call(client, "remember", {"content": f"{user}'s scratch note", "tier": "session"}, **named)
                seen[user] = listed(await call(client, "list_memories", {"tier": "session"}, **named))
                seen[user] += recalled(
                    await call(client, "recall", {"query": "scratch note", "tier": "session"}, **named)
                )
    assert seen == {user: [f"{user}'s scratch note"] * 2 for user in TOKENS}
