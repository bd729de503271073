"""Search exposure through a real MCP client: find_tools ranks and promotes, call_tool invokes anything."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc, text_of, tools_list_changed

SEARCH = {"mode": "search", "embedder": "fake", "core_tools": ["beta__echo"]}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_find_tools_ranks_promotes_and_call_tool_invokes(make_settings: MakeSettings, mode: str) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=SEARCH)
    changed, on_message = tools_list_changed()

    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode, message_handler=on_message) as client:
        before = [tool.name for tool in (await client.list_tools()).tools]
        found = await client.call_tool("find_tools", {"query": "add two integers together"})
        after = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
        summed = await client.call_tool("call_tool", {"name": "alpha__add", "arguments": {"a": 20, "b": 22}})
        direct = await client.call_tool("alpha__add", {"a": 1, "b": 2})
        if mode == "legacy":
            with anyio.fail_after(5):
                await changed.wait()

    assert before == ["find_tools", "call_tool", "beta__echo"]
    structured = found.structured_content
    assert structured is not None
    names = [tool["name"] for tool in structured["tools"]]
    ranked = [name for name in names if name != "beta__echo"]  # the core tool always comes along, first
    assert names[0] == "beta__echo"
    assert ranked[0].endswith("__add")
    assert len(names) <= 15
    assert structured["llm_filter"] == "skipped"
    assert structured["tokens"] < structured["all_tools_tokens"]
    assert {"find_tools", "call_tool", "beta__echo", ranked[0]} <= after
    assert summed.structured_content == {"result": 42}
    assert text_of(direct) == "3"


async def test_find_tools_needs_a_query(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, exposure=SEARCH)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("find_tools", {"query": "  "})
    assert refused.value.code == types.INVALID_PARAMS
