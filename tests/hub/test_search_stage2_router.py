"""Stage 2 of find_tools through the hub's routing layer (the LLM gateway) against the loopback provider server."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from pydantic import ValidationError

from hanzo_hub.config.exposure import ExposureSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.search import ToolSearch
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc
from tests.hub.llm_support import BACKENDS, NO_MEMORY, llm_section
from tests.llm.providers_server import Answer, Fail, ProviderServer, _provider_server_module, provider_server

__all__ = ["_provider_server_module", "provider_server"]

pytestmark = pytest.mark.anyio

SEARCH = {"mode": "search", "embedder": "fake", "llm_filter": "router"}


async def test_router_filter_keeps_and_orders_what_the_model_says(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer('Keep these: ["t2", "t1", "t77"]'))
    settings = make_settings(
        {"alpha": inproc("alpha"), "beta": inproc("beta")},
        exposure=SEARCH,
        llm=llm_section(provider_server),
        backends=BACKENDS,
        memory=NO_MEMORY,
    )
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        found = await client.call_tool("find_tools", {"query": "add two integers together"})
    structured = found.structured_content
    assert structured is not None
    assert structured["llm_filter"] == "applied"
    assert len(structured["tools"]) == 2  # t77 is not a candidate: ignored
    [sent] = [r.body for r in provider_server.requests("p")]
    prompt = sent["messages"][-1]["content"]
    assert prompt.startswith("Request: add two integers together")
    listed = _listed(prompt)
    assert [t["name"] for t in structured["tools"]] == [listed[1], listed[0]]


async def test_router_failure_keeps_stage1_and_says_so(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Fail(500), Fail(500))
    settings = make_settings(
        {"alpha": inproc("alpha")},
        exposure=SEARCH,
        llm=llm_section(provider_server),
        backends=BACKENDS,
        memory=NO_MEMORY,
    )
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        found = await client.call_tool("find_tools", {"query": "add two integers"})
    structured = found.structured_content
    assert structured is not None
    assert structured["llm_filter"] == "failed"
    assert "stage-1 order kept" in structured["note"]
    assert structured["tools"][0]["name"] == "add"


def _listed(prompt: str) -> list[str]:
    return [line.split(": ", 1)[1].split(" ", 1)[0] for line in prompt.splitlines() if line[:1] == "t"]


async def test_the_filter_reads_stage1_candidates_and_keeps_up_to_max_tools(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    """A deeper stage-1 list reaches the model; everything it keeps is returned up to max_tools, in its order."""
    keep_all = Answer(json.dumps([f"t{i}" for i in range(30, 0, -1)]))
    provider_server.script("p", keep_all)
    servers = {"alpha": inproc("alpha"), "beta": inproc("beta"), "gamma": inproc("gamma")}
    exposure = {**SEARCH, "stage1_candidates": 30, "max_tools": 25, "token_budget": 100_000}
    settings = make_settings(servers, exposure=exposure, llm=llm_section(provider_server), backends=BACKENDS,
                             memory=NO_MEMORY)  # fmt: skip
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        found = await client.call_tool("find_tools", {"query": "add two integers together"})
    structured = found.structured_content
    assert structured is not None
    [sent] = [r.body for r in provider_server.requests("p")]
    listed = _listed(sent["messages"][-1]["content"])
    assert len(listed) == 30
    assert [t["name"] for t in structured["tools"]] == listed[::-1][:25]


async def test_the_filter_reads_forty_candidates_by_default(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    """Unset, a filter reads 40 candidates (of the 41 tools of three fixture servers); without one, 20 are ranked."""
    provider_server.script("p", Answer('["t40", "t1"]'))
    servers = {"alpha": inproc("alpha"), "beta": inproc("beta"), "gamma": inproc("gamma")}
    settings = make_settings(servers, exposure=SEARCH, llm=llm_section(provider_server), backends=BACKENDS,
                             memory=NO_MEMORY)  # fmt: skip
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        filtered = await client.call_tool("find_tools", {"query": "add two integers together"})
    [sent] = [r.body for r in provider_server.requests("p")]
    listed = _listed(sent["messages"][-1]["content"])
    assert len(listed) == 40
    assert filtered.structured_content is not None
    assert [t["name"] for t in filtered.structured_content["tools"]] == [listed[39], listed[0]]

    async with Hub.open(make_settings(servers, memory=NO_MEMORY)) as hub:
        tools = tuple(await hub.list_tools())
    search = ToolSearch(ExposureSettings(**{**SEARCH, "llm_filter": "off", "index_store": "memory"}))
    selection, _ = await search.find("add two integers together", tools)
    assert len(tools) > 40
    assert len(selection.candidates) == 20
    assert selection.stage2 == "skipped"


async def test_max_tools_above_twenty_is_honoured_without_a_filter(make_settings: MakeSettings) -> None:
    """Unset, stage 1 ranks max(20, max_tools) tools: a max_tools of 25 returns 25, not the first 20."""
    servers = {"alpha": inproc("alpha"), "beta": inproc("beta"), "gamma": inproc("gamma")}
    exposure = {"mode": "search", "embedder": "fake", "llm_filter": "off", "max_tools": 25, "token_budget": 100_000}
    settings = make_settings(servers, exposure=exposure, memory=NO_MEMORY)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        found = await client.call_tool("find_tools", {"query": "add two integers together"})
    structured = found.structured_content
    assert structured is not None
    assert len(structured["tools"]) == 25


def test_stage1_candidates_below_max_tools_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match=r"stage1_candidates \(10\) is below max_tools \(15\)"):
        ExposureSettings(stage1_candidates=10)
    assert ExposureSettings(stage1_candidates=15, max_tools=15).stage1_candidates == 15
