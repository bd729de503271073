"""Memory's LLM steps answered by the hub's router against the scripted loopback provider: a full session is
summarized (its facts kept in the project), a cluster of project memories is generalized into a global one, and a
failing provider leaves memory on its deterministic fallback without an error."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc
from tests.hub.llm_support import BACKENDS, MEMORY, llm_section
from tests.llm.providers_server import Answer, Fail, ProviderServer, _provider_server_module, provider_server
from tests.memory._hub import call, listed

__all__ = ["_provider_server_module", "provider_server"]

FIRST = "we moved the staging database to port 5433 on monday"
SECOND = "the deploy window is thursday afternoon"


def _settings(make_settings: MakeSettings, server: ProviderServer, **memory: Any) -> Any:
    # A session budget the two notes pass (0.75 of 24 tokens): the second remember summarizes the oldest note.
    return make_settings(
        {"alpha": inproc("alpha")},
        llm=llm_section(server),
        backends=BACKENDS,
        memory={**MEMORY, "session_token_budget": 24, **memory},
    )


async def _two_session_notes(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
    for note in (FIRST, SECOND):
        await call(client, "remember", {"content": note, "tier": "session"})
    return (
        await call(client, "list_memories", {"tier": "project"}),
        await call(client, "list_memories", {"tier": "session"}),
    )


async def test_a_full_session_is_summarized_through_the_router(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    answer = {"summary": "The team moved staging.", "facts": ["Staging's database listens on port 5433"]}
    provider_server.script("p", Answer("```json\n" + json.dumps(answer) + "\n```", usage=(120, 30)))
    async with (
        Hub.open(_settings(make_settings, provider_server)) as hub,
        Client(build_server(hub), mode="legacy") as client,
    ):
        project, session = await _two_session_notes(client)
    [sent] = [r.body for r in provider_server.requests("p")]
    assert sent["model"] == "small"  # cost-first bookkeeping
    assert FIRST in sent["messages"][-1]["content"]
    assert SECOND not in sent["messages"][-1]["content"]  # only the oldest share is summarized
    assert listed(project) == ["Staging's database listens on port 5433"]
    assert project["memories"][0]["tags"] == ["fact"]
    assert sorted(listed(session)) == sorted(["The team moved staging.", SECOND])


async def test_a_failing_provider_leaves_the_extractive_summary(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Fail(500), Fail(500))
    async with (
        Hub.open(_settings(make_settings, provider_server)) as hub,
        Client(build_server(hub), mode="legacy") as client,
    ):
        project, session = await _two_session_notes(client)
    assert provider_server.requests("p")  # it was asked
    assert listed(project) == [FIRST]  # the fact-like sentence, kept by the deterministic fallback
    assert SECOND in listed(session)


async def test_consolidation_generalizes_a_cluster_through_the_router(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer("Ana deploys every service on Thursdays.", usage=(80, 10)))
    settings = _settings(make_settings, provider_server, cluster_cosine=0.5, cluster_min_size=3)
    notes = [f"ana deploys the {what} on thursdays" for what in ("api", "web app", "worker")]
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        for note in notes:
            await call(client, "remember", {"content": note})
        report = await call(client, "consolidate", {})
        again = await call(client, "consolidate", {})
        general = await call(client, "list_memories", {"tier": "global"})
        project = await call(client, "list_memories", {"tier": "project"})
    [sent] = [r.body for r in provider_server.requests("p")]
    assert all(note in sent["messages"][-1]["content"] for note in notes)
    assert len(report["generalized"]) == 1
    assert not any("generalize" in s for s in report["skipped"])
    assert again["generalized"] == []  # the cluster is marked generalized: no second request
    assert listed(general) == ["Ana deploys every service on Thursdays."]
    assert all("generalized" in m["tags"] for m in project["memories"])
