"""Pinned profiles, per-client exposure and the sampling stage 2, through a real MCP client."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.config import ExposureSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.search import ToolSearch, UnknownProfile
from hanzo_hub.hub.server import build_server
from hanzo_hub.selection.dense import SyncStats
from tests.conftest import MakeSettings, inproc, serve_http_in_process, text_of, tools_list_changed

pytestmark = pytest.mark.anyio

SEARCH_FAKE = {"mode": "search", "embedder": "fake"}
PROFILES = {"math": {"servers": ["alpha"], "tools": ["beta__echo"]}, "echo": {"tools": ["beta__echo"]}}


def _client(hub: Hub, name: str = "plain", **kwargs: Any) -> Client:
    return Client(build_server(hub), mode="legacy", client_info=types.Implementation(name=name, version="1"), **kwargs)


async def test_deployment_profile_limits_listing_and_calls(make_settings: MakeSettings) -> None:
    exposure = {"profiles": PROFILES, "profile": "math"}
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=exposure)
    async with Hub.open(settings) as hub, _client(hub) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        allowed = await client.call_tool("beta__echo", {"text": "hi"})
        refused = await client.call_tool("beta__add", {"a": 1, "b": 2})
    assert names
    assert all(n.startswith("alpha__") or n == "beta__echo" for n in names)
    assert "alpha__add" in names
    assert "beta__add" not in names
    assert text_of(allowed) == "hi"
    assert refused.is_error
    assert "not in profile 'math'" in text_of(refused)


async def test_per_client_mode_and_profile(make_settings: MakeSettings) -> None:
    exposure = {
        "embedder": "fake",
        "profiles": PROFILES,
        "clients": {"searcher": {"mode": "search"}, "echoer": {"profile": "echo"}},
    }
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=exposure)
    async with Hub.open(settings) as hub:
        async with _client(hub, "searcher") as client:
            searcher = [tool.name for tool in (await client.list_tools()).tools]
            found = await client.call_tool("find_tools", {"query": "add two integers"})
            via = await client.call_tool("call_tool", {"name": "beta__add", "arguments": {"a": 2, "b": 3}})
        async with _client(hub, "echoer") as client:
            echoer = [tool.name for tool in (await client.list_tools()).tools]
            in_profile = await client.call_tool("find_tools", {"query": "add"})
        async with _client(hub, "someone-else") as client:
            everyone = {tool.name for tool in (await client.list_tools()).tools}
    assert searcher == ["find_tools", "call_tool"]
    assert found.structured_content is not None
    assert found.structured_content["tools"][0]["name"].endswith("__add")
    assert text_of(via) == "5"
    assert echoer == ["beta__echo"]
    # 'auto' (the default) lists every tool of so small a profile, and find_tools still answers, within the profile
    assert in_profile.structured_content is not None
    assert [t["name"] for t in in_profile.structured_content["tools"]] == ["beta__echo"]
    assert {"alpha__add", "beta__add", "beta__echo"} <= everyone
    assert "find_tools" not in everyone


async def test_find_tools_in_a_profile_only_returns_its_tools(make_settings: MakeSettings) -> None:
    exposure = {"mode": "search", "embedder": "fake", "profiles": PROFILES, "clients": {"p": {"profile": "echo"}}}
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=exposure)
    async with Hub.open(settings) as hub, _client(hub, "p") as client:
        found = await client.call_tool("find_tools", {"query": "add two integers"})
        refused = await client.call_tool("call_tool", {"name": "alpha__add", "arguments": {"a": 1, "b": 1}})
    assert found.structured_content is not None
    assert [t["name"] for t in found.structured_content["tools"]] == ["beta__echo"]
    assert refused.is_error


def test_unknown_profile_is_a_config_error(make_settings: MakeSettings) -> None:
    with pytest.raises(Exception, match="unknown profile"):
        make_settings({"alpha": inproc("alpha")}, exposure={"profile": "nope"})


async def test_stage2_through_client_sampling(make_settings: MakeSettings) -> None:
    """The client's own model filters: it keeps only the ``add`` candidates, and find_tools says it applied."""
    prompts: list[str] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        prompt = params.messages[-1].content.text  # type: ignore[union-attr]
        prompts.append(prompt)
        kept = [tid for tid, line in re.findall(r"^(t\d+): (.*)$", prompt, re.MULTILINE) if "__add " in line]
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=json.dumps(kept)), model="client-model"
        )

    exposure = {"mode": "search", "embedder": "fake", "llm_filter": "sampling"}
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=exposure)
    async with Hub.open(settings) as hub, _client(hub, sampling_callback=sampling) as client:
        found = await client.call_tool("find_tools", {"query": "add two integers together"})
    assert prompts
    assert "Request: add two integers together" in prompts[0]
    structured = found.structured_content
    assert structured is not None
    assert structured["llm_filter"] == "applied"
    assert sorted(t["name"] for t in structured["tools"]) == ["alpha__add", "beta__add"]


async def test_without_sampling_stage2_is_skipped(make_settings: MakeSettings) -> None:
    exposure = {"mode": "search", "embedder": "fake", "llm_filter": "sampling"}
    settings = make_settings({"alpha": inproc("alpha")}, exposure=exposure)
    async with Hub.open(settings) as hub, _client(hub) as client:
        found = await client.call_tool("find_tools", {"query": "add two integers"})
    assert found.structured_content is not None
    assert found.structured_content["llm_filter"] == "skipped"


async def test_requested_profile_header_is_resolved_and_checked(make_settings: MakeSettings) -> None:
    """A header (or ``?profile=``) picks the profile; an unknown one is refused. In memory there is no HTTP
    request, so the resolver gets a request-shaped context."""
    settings = make_settings({"alpha": inproc("alpha")}, exposure={"profiles": PROFILES})
    search = ToolSearch(settings.exposure)

    def ctx(headers: dict[str, str], query: dict[str, str]) -> SimpleNamespace:
        request = SimpleNamespace(headers=headers, query_params=query)
        return SimpleNamespace(protocol_version="2025-06-18", params={}, session=None, request=request)

    with pytest.raises(UnknownProfile):
        search.view(ctx({"x-hanzo-profile": "nope"}, {}))
    assert search.view(ctx({"x-hanzo-profile": "echo"}, {})).profile == "echo"
    assert search.view(ctx({}, {"profile": "math"})).profile == "math"
    assert search.view(ctx({}, {})).profile is None


async def test_index_persists_and_updates_incrementally(tmp_path: Path) -> None:
    """The tool vectors live in embedded Chroma keyed by content hash: a new hub process re-embeds nothing, a
    changed tool is re-embedded alone, a removed one is deleted, and the ranking follows the change."""
    settings = ExposureSettings(mode="search", embedder="fake")

    def tool(name: str, description: str) -> types.Tool:
        return types.Tool(name=name, description=description, input_schema={"type": "object"})

    tools = (tool("a__add", "Add two integers."), tool("a__echo", "Echo the text."), tool("b__ping", "Ping a host."))
    first = ToolSearch(settings, home=tmp_path)
    await first.find("add numbers", tools)
    assert first.sync_stats == SyncStats(embedded=3, reused=0, deleted=0)
    await first.aclose()

    again = ToolSearch(settings, home=tmp_path)
    await again.find("add numbers", tools)
    assert again.sync_stats == SyncStats(embedded=0, reused=3, deleted=0)
    changed = (tool("a__add", "Add two integers."), tool("a__echo", "Convert a PDF into plain text."))
    _, chosen = await again.find("convert a pdf to text", changed)
    assert again.sync_stats == SyncStats(embedded=1, reused=1, deleted=1)
    assert chosen[0].name == "a__echo"
    await again.aclose()
    assert (tmp_path / "tool-index").is_dir()


async def test_a_tool_list_change_reaches_the_search_index(make_settings: MakeSettings) -> None:
    """A downstream adds a tool: the client hears list_changed, and the next find_tools ranks the new tool."""
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=SEARCH_FAKE)
    changed, on_message = tools_list_changed()

    async with Hub.open(settings) as hub:
        await hub.wait_discovered()
        async with _client(hub, message_handler=on_message) as client:
            before = await client.call_tool("find_tools", {"query": "added at run time"})
            await client.call_tool("call_tool", {"name": "beta__grow", "arguments": {}})
            with anyio.fail_after(5):
                await changed.wait()
            after = await client.call_tool("find_tools", {"query": "added at run time"})
    assert before.structured_content is not None
    assert after.structured_content is not None
    assert "beta__extra" not in [t["name"] for t in before.structured_content["tools"]]
    assert after.structured_content["tools"][0]["name"] == "beta__extra"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_profile_picked_over_http_by_query_parameter(make_settings: MakeSettings, mode: str) -> None:
    """A real HTTP client picks a profile with ``?profile=``; without it the same hub shows every tool."""
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure={"profiles": PROFILES})
    async with serve_http_in_process(settings) as url:
        async with Client(f"{url}?profile=echo", mode=mode) as client:
            pinned = [tool.name for tool in (await client.list_tools()).tools]
            refused = await client.call_tool("alpha__add", {"a": 1, "b": 2})
        async with Client(url, mode=mode) as client:
            everything = {tool.name for tool in (await client.list_tools()).tools}
    assert pinned == ["beta__echo"]
    assert refused.is_error
    assert {"alpha__add", "beta__echo"} <= everything
