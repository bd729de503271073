"""The relay against the reference server-everything (npm, handshake era only), through the hub on every transport.

Its sampling, elicitation, roots, progress and logging tools ask the client things mid-call; each answer must come
from the client on the other side of the hub, in both client eras (a 2026-07-28 client answers through the era
bridge's ``InputRequiredResult`` rounds).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import MCPDeprecationWarning

from tests.conftest import REPO, Connect, MakeSettings, text_of, wait_until

EVERYTHING = REPO / "third_party/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.npm,
    pytest.mark.skipif(
        not EVERYTHING.exists(), reason="server-everything not installed (scripts/install-test-servers)"
    ),
]


@pytest.fixture
def everything(make_settings: MakeSettings) -> Any:
    return make_settings({"ev": {"command": "node", "args": [str(EVERYTHING), "stdio"]}})


class Client:
    """Answers like a person and an LLM would; remembers what it was asked."""

    def __init__(self, elicit: str = "accept") -> None:
        self.elicit = elicit
        self.asked: list[str] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []

    async def sampling(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="a sampled answer"), model="test-llm"
        )

    async def elicitation(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append("elicitation")
        if self.elicit != "accept":
            return types.ElicitResult(action="decline")
        schema: dict[str, Any] = getattr(params, "requested_schema", {}) or {}
        content = {name: _default(prop) for name, prop in schema.get("properties", {}).items()}
        return types.ElicitResult(action="accept", content={k: v for k, v in content.items() if v is not None})

    async def roots(self, ctx: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/everything", name="ev-project")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    def kwargs(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.roots,
            "logging_callback": self.log,
            "log_level": "debug",
        }


def _default(prop: dict[str, Any]) -> Any:
    if "default" in prop:
        return prop["default"]
    if "enum" in prop:
        return prop["enum"][0]
    return {"string": "x", "number": 1, "integer": 1, "boolean": True}.get(prop.get("type", ""))


async def test_sampling_is_answered_by_the_client(connect: Connect, everything: Any) -> None:
    client = Client()
    async with connect(everything, **client.kwargs()) as session:
        result = await session.call_tool("trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 20})
    assert client.asked == ["sampling"]
    assert "a sampled answer" in text_of(result)


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_elicitation_reaches_the_client(connect: Connect, everything: Any, answer: str) -> None:
    client = Client(elicit=answer)
    async with connect(everything, **client.kwargs()) as session:
        result = await session.call_tool("trigger-elicitation-request", {})
    assert client.asked == ["elicitation"]
    assert not result.is_error, text_of(result)
    assert ("declined" in text_of(result).lower()) == (answer == "decline")


async def test_roots_come_from_the_client(connect: Connect, everything: Any) -> None:
    client = Client()
    async with connect(everything, **client.kwargs()) as session:
        result = await session.call_tool("get-roots-list", {})
    assert "file:///work/everything" in text_of(result)


async def test_progress_of_a_long_operation_reaches_the_client(connect: Connect, everything: Any) -> None:
    steps: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        steps.append(value)

    async with connect(everything) as session:
        result = await session.call_tool(
            "trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=progress
        )
    assert not result.is_error, text_of(result)
    assert steps == [1, 2, 3]


async def test_simulated_logging_reaches_a_handshake_era_client(connect: Connect, everything: Any) -> None:
    if connect.mode != "legacy":  # type: ignore[attr-defined]
        pytest.skip("2026-07-28 delivers logs only on the request that opted in; this server logs after returning")
    client = Client()
    async with connect(everything, **client.kwargs()) as session:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await session.set_logging_level("debug")
        await session.call_tool("toggle-simulated-logging", {})
        await wait_until(lambda: bool(client.logs), timeout=10)
    assert client.logs[0].level in {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}


def test_everything_is_where_the_installer_puts_it() -> None:
    assert Path(EVERYTHING).is_file()
