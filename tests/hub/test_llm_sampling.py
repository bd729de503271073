"""Sampling fulfilment: a real downstream server (the conformance fixture, a subprocess) asks for sampling during
a tool call; the client has no sampling capability, so the hub answers with its router (the scripted model)."""

from __future__ import annotations

import sys
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import REPO, MakeSettings
from tests.hub.llm_support import BACKENDS, NO_MEMORY, llm_section
from tests.llm.providers_server import Answer, ProviderServer, _provider_server_module, provider_server

__all__ = ["_provider_server_module", "provider_server"]

pytestmark = pytest.mark.integration

FIXTURE = REPO / "tests" / "conformance" / "fixture_server.py"


def _fixture(protocol: str) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(FIXTURE), "--stdio"], "cwd": str(REPO), "protocol": protocol}


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("client_mode", ["legacy", "auto"])
async def test_the_router_answers_sampling_for_a_client_that_cannot(
    make_settings: MakeSettings, provider_server: ProviderServer, client_mode: str
) -> None:
    provider_server.script("p", Answer("routed answer", usage=(12, 3)))
    settings = make_settings(
        {"fx": _fixture("legacy")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=client_mode) as client:
        result = await client.call_tool("test_sampling", {"prompt": "What is 2+2?"})
    assert not result.is_error, _text(result)
    assert _text(result) == "LLM response: routed answer"
    [request] = provider_server.requests("p")
    assert request.body["model"] == "small"
    assert request.body["messages"][-1]["content"] == "What is 2+2?"


async def test_sampling_client_mode_never_uses_the_router(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    llm = llm_section(provider_server, sampling="client")
    settings = make_settings({"fx": _fixture("legacy")}, llm=llm, memory=NO_MEMORY, backends=BACKENDS)
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        try:  # the fixture reports the missing capability as a protocol error or an error result
            failed = (await client.call_tool("test_sampling", {"prompt": "What is 2+2?"})).is_error
        except MCPError:
            failed = True
    assert failed
    assert provider_server.requests("p") == []


async def test_a_client_that_can_sample_still_answers_first(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="client answer"), model="client-model"
        )

    settings = make_settings(
        {"fx": _fixture("legacy")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy", sampling_callback=sampling) as c:
        result = await c.call_tool("test_sampling", {"prompt": "hi"})
    assert _text(result) == "LLM response: client answer"
    assert provider_server.requests("p") == []
