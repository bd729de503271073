"""Exposure 'auto', the default, through a real MCP client: every tool while their definitions are small, search's
tools once they take more than ``exposure.auto_search_tokens``, and the switch when a server's tools grow."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.config import ExposureSettings
from hanzo_hub.hub.auto_exposure import AutoListing, ToolTokens
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc, text_of, tools_list_changed

AUTO = {"embedder": "fake"}  # the mode left at its default


def test_auto_is_the_default_mode_with_a_tenth_of_a_200k_context() -> None:
    settings = ExposureSettings()
    assert settings.mode == "auto"
    assert settings.auto_search_tokens == 20_000


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_few_tools_are_all_listed_and_find_tools_still_answers(make_settings: MakeSettings, mode: str) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=AUTO)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        found = await client.call_tool("find_tools", {"query": "add two integers together"})
        after = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        summed = await client.call_tool("call_tool", {"name": "alpha__add", "arguments": {"a": 40, "b": 2}})
        direct = await client.call_tool("alpha__add", {"a": 1, "b": 2})
    assert {"alpha__add", "beta__echo"} <= set(names)
    assert not {"find_tools", "call_tool"} & set(names)
    assert found.structured_content is not None
    assert found.structured_content["tools"][0]["name"].endswith("__add")
    assert after == names  # nothing to promote into a list that holds every tool already
    assert summed.structured_content == {"result": 42}
    assert text_of(direct) == "3"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_over_the_threshold_list_search_tools_instead(make_settings: MakeSettings, mode: str) -> None:
    exposure = {**AUTO, "auto_search_tokens": 50, "core_tools": ["beta__echo"]}
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=exposure)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        before = [tool.name for tool in (await client.list_tools()).tools]
        found = await client.call_tool("find_tools", {"query": "add two integers together"})
        after = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
        summed = await client.call_tool("call_tool", {"name": "alpha__add", "arguments": {"a": 40, "b": 2}})
    assert before == ["find_tools", "call_tool", "beta__echo"]
    assert found.structured_content is not None
    top = found.structured_content["tools"][1]["name"]  # after the core tool
    assert top.endswith("__add")
    assert top in after
    assert summed.structured_content == {"result": 42}


async def test_a_server_whose_tools_grow_past_the_threshold_switches_its_clients_to_search(
    make_settings: MakeSettings,
) -> None:
    servers = {"alpha": inproc("alpha")}
    async with Hub.open(make_settings(servers, exposure=AUTO)) as hub:
        tools = await hub.list_tools()
    threshold = await ToolTokens().total(tools)  # exactly what alpha lists now: one more tool is too many
    settings = make_settings(servers, exposure={**AUTO, "auto_search_tokens": threshold})
    changed, on_message = tools_list_changed()

    async with Hub.open(settings) as hub:
        await hub.wait_discovered()
        async with Client(build_server(hub), mode="legacy", message_handler=on_message) as client:
            before = [tool.name for tool in (await client.list_tools()).tools]
            await client.call_tool("grow", {})  # one server: its names are not prefixed
            with anyio.fail_after(5):
                await changed.wait()
            after = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
            extra = await client.call_tool("call_tool", {"name": "extra", "arguments": {}})
    assert before == [tool.name for tool in tools]
    assert "find_tools" not in before
    assert after == ["find_tools", "call_tool"]
    assert text_of(extra) == "extra!"


async def test_a_listed_downstream_tool_named_find_tools_is_the_downstreams_in_auto(
    make_settings: MakeSettings,
) -> None:
    """With every tool listed, a downstream tool the client sees as ``find_tools`` is called, not the hub's; once
    the list is search's, the hub's search tools win, as in search mode."""
    servers = {"alpha": inproc("alpha", tool_overrides={"echo": {"rename": "find_tools"}})}
    few = make_settings(servers, exposure=AUTO)
    many = make_settings(servers, exposure={**AUTO, "auto_search_tokens": 10})
    async with Hub.open(few) as hub, Client(build_server(hub)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        echoed = await client.call_tool("find_tools", {"text": "downstream"})
    async with Hub.open(many) as hub, Client(build_server(hub)) as client:
        found = await client.call_tool("find_tools", {"query": "echo some text"})
        listed_then = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
    assert names.count("find_tools") == 1
    assert text_of(echoed) == "downstream"
    assert found.structured_content is not None
    assert "find_tools" in [tool["name"] for tool in found.structured_content["tools"]]  # the downstream's, found
    assert listed_then.count("find_tools") == 1  # but not promoted beside the hub's own


async def test_tokens_are_counted_once_per_tool_and_again_when_it_changes() -> None:
    counted: list[str] = []

    class Counter:
        def count(self, text: str) -> int:
            counted.append(text)
            return len(text)

    tool = types.Tool(name="t", description="d", input_schema={"type": "object"})
    tokens = ToolTokens(Counter())
    first = await tokens.total([tool])
    assert await tokens.total([tool]) == first
    assert len(counted) == 1
    changed = tool.model_copy(update={"description": "a longer description"})
    assert await tokens.total([changed]) > first
    assert len(counted) == 2
    auto = AutoListing(threshold=first, counter=Counter())
    assert await auto([tool]) == "all"
    assert await auto([tool, changed.model_copy(update={"name": "u"})]) == "search"


async def test_tools_smaller_in_bytes_than_the_threshold_are_listed_without_the_tokenizer() -> None:
    class Unloadable:
        name = "never"

        def count(self, text: str) -> int:
            raise AssertionError("the tokenizer was needed")

    tools = [types.Tool(name=f"t{i}", description="d" * 100, input_schema={"type": "object"}) for i in range(10)]
    assert await AutoListing(threshold=10_000, counter=Unloadable())(tools) == "all"
    with pytest.raises(AssertionError, match="the tokenizer was needed"):
        await AutoListing(threshold=100, counter=Unloadable())(tools)
