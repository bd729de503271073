"""One test body per behaviour, run over memory, streamable HTTP and stdio, with legacy and auto clients."""

from __future__ import annotations

import json

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError

from tests.conftest import Connect, MakeSettings, inproc, serve_http_in_process, text_of


async def test_every_request_kind_works_over_every_transport(
    connect: Connect, make_settings: MakeSettings, fixture_tools: set[str]
) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with connect(settings) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        added = await client.call_tool("alpha__add", {"a": 20, "b": 22})
        image = await client.call_tool("beta__image", {})
        embedded = await client.call_tool("beta__embedded", {})
        failed = await client.call_tool("alpha__fail", {"reason": "as designed"})
        doc = await client.read_resource("hub://alpha/fixture://doc")
        item = await client.read_resource("hub://beta/fixture://items/7")
        templates = (await client.list_resource_templates()).resource_templates
        prompt = await client.get_prompt("beta__greet", {"name": "Grace"})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nobody__echo", {})
    assert names == {f"{server}__{tool}" for server in ("alpha", "beta") for tool in fixture_tools}
    assert added.structured_content == {"result": 42}
    assert text_of(added) == "42"
    assert isinstance(image.content[0], types.ImageContent)
    assert image.content[0].mime_type == "image/png"
    assert isinstance(embedded.content[0], types.EmbeddedResource)
    assert failed.is_error
    assert "as designed" in text_of(failed)
    assert [getattr(c, "text", None) for c in doc.contents] == ["the document"]
    assert [getattr(c, "text", None) for c in item.contents] == ["item 7"]
    assert {t.uri_template for t in templates} == {
        "hub://alpha/fixture://items/{item}",
        "hub://beta/fixture://items/{item}",
    }
    assert isinstance(prompt.messages[0].content, types.TextContent)
    assert prompt.messages[0].content.text == "Hello, Grace!"
    assert unknown.value.code == types.INVALID_PARAMS


async def test_a_tool_list_change_reaches_the_client_over_every_transport(
    connect: Connect, make_settings: MakeSettings
) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    notified = [anyio.Event()]

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notified[-1].set()

    async def tool_names() -> set[str]:
        return {tool.name for tool in (await client.list_tools()).tools}

    async with connect(settings, message_handler=on_message) as client:
        await client.list_tools()
        if client.protocol_version == "2026-07-28":
            async with client.listen(tools_list_changed=True) as subscription:
                await client.call_tool("alpha__grow", {})
                with anyio.fail_after(10):
                    async for _event in subscription:
                        if "alpha__extra" in await tool_names():
                            break
        else:
            await client.call_tool("alpha__grow", {})
            with anyio.fail_after(10):
                # Discovery may announce its own change first; wait until a notification comes with the new tool.
                while True:
                    await notified[-1].wait()
                    notified.append(anyio.Event())
                    if "alpha__extra" in await tool_names():
                        break
        assert "alpha__extra" in await tool_names()


async def test_a_single_server_over_every_transport_has_unprefixed_names(
    connect: Connect, make_settings: MakeSettings, fixture_tools: set[str]
) -> None:
    settings = make_settings({"alpha": inproc("alpha")})
    async with connect(settings) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        echoed = await client.call_tool("echo", {"text": "solo"})
    assert names == fixture_tools
    assert text_of(echoed) == "solo"


async def test_healthz_reports_servers_and_tools(make_settings: MakeSettings, fixture_tools: set[str]) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})
    async with serve_http_in_process(settings) as url, httpx2.AsyncClient() as http:
        async with Client(url) as client:  # the first list waits for discovery; /healthz never waits
            await client.list_tools()
        response = await http.get(url.removesuffix("/mcp") + "/healthz")
    report = json.loads(response.text)
    assert response.status_code == 200
    assert report["status"] == "ok"
    assert report["servers"] == 2
    assert report["tools"] == 2 * len(fixture_tools)
    assert set(report["detail"]) == {"alpha", "beta"}
