"""The front server in memory: aggregation, pass-through of every content kind, errors, and list changes."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.naming import NAME_PATTERN
from hanzo_hub.hub.server import SERVER_NAME, build_server
from hanzo_hub.hub.status import STATUS_URI
from tests.conftest import MakeSettings, inproc, text_of, tools_list_changed, wait_until
from tests.fixtures.downstream import build


def comparable(result: types.CallToolResult) -> dict[str, Any]:
    """A result without ``_meta`` (which carries the answering server's identity)."""
    return result.model_dump(exclude={"meta"})


async def test_tools_of_every_server_are_listed_under_their_prefix(
    make_settings: MakeSettings, fixture_tools: set[str], mode: str
) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        tools = (await client.list_tools()).tools
        info = client.server_info
    names = {tool.name for tool in tools}
    assert names == {f"{server}__{tool}" for server in ("alpha", "beta") for tool in fixture_tools}
    assert all(NAME_PATTERN.match(name) for name in names)
    assert info is not None
    assert info.name == SERVER_NAME


async def test_tool_schemas_and_descriptions_are_those_of_the_downstream(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Client(build("alpha")) as direct:
        expected = {tool.name: tool for tool in (await direct.list_tools()).tools}
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        server, _, original = tool.name.partition("__")
        if server == "alpha":
            assert tool.model_copy(update={"name": original}) == expected[original]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("echo", {"text": "héllo wörld"}),
        ("add", {"a": 2, "b": 40}),
        ("image", {}),
        ("audio", {}),
        ("embedded", {}),
        ("fail", {"reason": "nope"}),
    ],
)
async def test_call_tool_result_equals_a_direct_connections(
    make_settings: MakeSettings, mode: str, tool: str, arguments: dict[str, Any]
) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Client(build("alpha"), mode=mode) as direct:
        expected = await direct.call_tool(tool, arguments)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        result = await client.call_tool(f"alpha__{tool}", arguments)
    assert comparable(result) == comparable(expected)


async def test_structured_content_and_error_flag_pass_through(make_settings: MakeSettings, mode: str) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        added = await client.call_tool("beta__add", {"a": 1, "b": 2})
        failed = await client.call_tool("beta__fail", {"reason": "bad input"})
    assert added.structured_content == {"result": 3}
    assert not added.is_error
    assert failed.is_error
    assert "bad input" in text_of(failed)


async def test_resources_templates_and_prompts_are_namespaced(make_settings: MakeSettings, mode: str) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Client(build("alpha"), mode=mode) as direct:
        expected_prompt = await direct.get_prompt("greet", {"name": "Ada"})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
        doc = await client.read_resource("hub://beta/fixture://doc")
        item = await client.read_resource("hub://alpha/fixture://items/widget")
        prompt = await client.get_prompt("alpha__greet", {"name": "Ada"})
    assert {str(r.uri) for r in resources} == {"hub://alpha/fixture://doc", "hub://beta/fixture://doc", STATUS_URI}
    assert {t.uri_template for t in templates} == {
        "hub://alpha/fixture://items/{item}",
        "hub://beta/fixture://items/{item}",
    }
    assert {p.name for p in prompts} == {"alpha__greet", "beta__greet"}
    assert [c.text for c in doc.contents if isinstance(c, types.TextResourceContents)] == ["the document"]
    assert [c.text for c in item.contents if isinstance(c, types.TextResourceContents)] == ["item widget"]
    assert prompt.messages == expected_prompt.messages


async def test_a_single_server_is_exposed_without_prefix(
    make_settings: MakeSettings, fixture_tools: set[str], mode: str
) -> None:
    settings = make_settings({"alpha": inproc("alpha")})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        echoed = await client.call_tool("echo", {"text": "plain"})
        item = await client.read_resource("fixture://items/x")
    assert names == fixture_tools
    assert resources == {"fixture://doc", STATUS_URI}
    assert text_of(echoed) == "plain"
    assert [c.text for c in item.contents if isinstance(c, types.TextResourceContents)] == ["item x"]


async def test_prefix_can_be_forced_on_for_a_single_server(
    make_settings: MakeSettings, fixture_tools: set[str]
) -> None:
    settings = make_settings({"alpha": inproc("alpha", alias="a1")}, exposure={"prefix": True})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert names == {f"a1__{tool}" for tool in fixture_tools}


async def test_without_prefixes_the_first_server_wins_a_shared_name(
    make_settings: MakeSettings, fixture_tools: set[str]
) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure={"prefix": False})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
    assert sorted(names) == sorted(fixture_tools)
    assert hub.registry.resolve_tool("echo").server == "alpha"


async def test_unknown_tool_is_an_invalid_params_error(make_settings: MakeSettings, mode: str) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        with pytest.raises(MCPError) as tool_error:
            await client.call_tool("alpha__nope", {})
        with pytest.raises(MCPError) as prompt_error:
            await client.get_prompt("gamma__greet", {"name": "x"})
        with pytest.raises(MCPError) as resource_error:
            await client.read_resource("hub://nobody/fixture://doc")
    assert tool_error.value.code == types.INVALID_PARAMS
    assert prompt_error.value.code == types.INVALID_PARAMS
    assert resource_error.value.code == types.INVALID_PARAMS


async def test_a_server_that_cannot_start_yields_an_error_result_naming_it(
    make_settings: MakeSettings, mode: str, fixture_tools: set[str]
) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "kaputt": inproc("broken")})
    tool = types.Tool(name="echo", input_schema={"type": "object"})
    SnapshotStore(settings.snapshot_dir).save("kaputt", Listing(tools=(tool,)))
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        failed = await client.call_tool("kaputt__echo", {"text": "x"})
        fine = await client.call_tool("alpha__echo", {"text": "still here"})
    assert "kaputt__echo" in names
    assert {f"alpha__{t}" for t in fixture_tools} <= names
    assert failed.is_error
    assert "'kaputt'" in text_of(failed)
    assert "broken fixture refuses to start" in text_of(failed)
    assert text_of(fine) == "still here"


async def test_a_read_from_a_failing_server_is_an_internal_error(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "kaputt": inproc("broken")})
    resource = types.Resource(name="doc", uri="fixture://doc")
    SnapshotStore(settings.snapshot_dir).save("kaputt", Listing(resources=(resource,)))
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        with pytest.raises(MCPError) as error:
            await client.read_resource("hub://kaputt/fixture://doc")
    assert error.value.code == types.INTERNAL_ERROR
    assert "kaputt" in error.value.error.message


async def test_a_tool_list_change_reaches_handshake_era_clients(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    changed, on_message = tools_list_changed()

    async with Hub.open(settings) as hub:
        await hub.wait_discovered()
        async with Client(build_server(hub), mode="legacy", message_handler=on_message) as client:
            await client.list_tools()  # the hub learns of a session on its first request
            await client.call_tool("beta__grow", {})
            with anyio.fail_after(5):
                await changed.wait()
            names = {tool.name for tool in (await client.list_tools()).tools}
        await wait_until(lambda: not hub.notifier.sessions())  # a client that left is forgotten
    assert "beta__extra" in names


async def test_a_tool_list_change_reaches_listening_2026_clients(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        await client.list_tools()
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("alpha__grow", {})
            with anyio.fail_after(5):
                async for event in subscription:
                    assert type(event).__name__ == "ToolsListChanged"
                    break
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert "alpha__extra" in names


async def test_proxied_results_carry_the_hubs_identity_not_the_downstreams(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with Hub.open(settings) as hub:
        async with Client(build_server(hub), mode="auto") as modern:
            stamped = await modern.call_tool("alpha__echo", {"text": "x"})
            read = await modern.read_resource("hub://beta/fixture://doc")
        async with Client(build_server(hub), mode="legacy") as legacy:
            plain = await legacy.call_tool("alpha__echo", {"text": "x"})
    for result in (stamped, read):
        assert result.meta is not None
        assert result.meta[types.SERVER_INFO_META_KEY]["name"] == SERVER_NAME
    assert types.SERVER_INFO_META_KEY not in (plain.meta or {})
