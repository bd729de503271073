"""Stage 2 of find_tools through the hub's routing layer (the LLM gateway) against the loopback provider server."""

from __future__ import annotations

import pytest
from mcp import Client

from hanzo_hub.hub.core import Hub
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
    listed = [line.split(": ", 1)[1].split(" ", 1)[0] for line in prompt.splitlines() if line[:1] == "t"]
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
