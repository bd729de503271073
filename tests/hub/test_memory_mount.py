"""The hub's own memory server: on by default, served like a downstream, scoped by the hub's view of who is asking."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.memory_mount import PROJECT_KEY, USER_KEY
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc

MEMORY = {"enabled": True, "embedder": "fake", "store": "memory"}


def _contents(result: Any) -> list[str]:
    return [item["memory"]["content"] for item in result.structured_content["results"]]


async def test_memory_is_off_when_disabled(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, memory={"enabled": False})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert not any(name.startswith("memory__") for name in names)


async def test_memory_is_on_by_default(make_settings: MakeSettings) -> None:
    # The defaults as shipped (persistent store, MiniLM): listing the tools opens neither the store nor the model.
    settings = make_settings({"alpha": inproc("alpha")}, memory={})
    assert settings.memory.enabled
    assert settings.memory.store == "chroma"
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    # A lone downstream stays unprefixed under the default exposure.prefix "auto"; the hub's own tools keep theirs.
    assert {"memory__remember", "memory__recall", "echo"} <= names
    assert not (settings.memory_dir / "chroma").exists()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_remember_and_recall_through_the_hub(make_settings: MakeSettings, mode: str) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, memory=MEMORY)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        await client.call_tool("memory__remember", {"content": "The deploy key lives in the vault", "tier": "project"})
        recalled = await client.call_tool("memory__recall", {"query": "where is the deploy key"})
    assert {"memory__remember", "memory__recall", "memory__forget", "echo"} <= names
    assert _contents(recalled) == ["The deploy key lives in the vault"]


async def test_a_client_cannot_claim_another_identity(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, memory=MEMORY)
    spoof = {USER_KEY: "mallory"}
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        await client.call_tool("memory__remember", {"content": "written while claiming to be mallory"}, meta=spoof)
        mine = await client.call_tool("memory__recall", {"query": "claiming to be mallory"})
        other_project = await client.call_tool(
            "memory__recall", {"query": "claiming to be mallory"}, meta={PROJECT_KEY: "elsewhere"}
        )
    # The claim was ignored: the memory belongs to the real (local) user, in the default project only.
    assert _contents(mine) == ["written while claiming to be mallory"]
    assert _contents(other_project) == []
