"""The relay end to end: what downstream servers send back (sampling, elicitation, roots, logging, progress,
resource updates) reaches the client, and what the client sends (cancellation, answers) reaches the server.

The downstream is the conformance fixture server, a real subprocess, in both protocol eras (``protocol: legacy``
forces 2025-11-25; ``auto`` negotiates 2026-07-28); the client reaches the hub in memory, over streamable HTTP and
over stdio, in both eras. Every combination runs the same test bodies.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPDeprecationWarning, MCPError

from tests.conftest import REPO, Connect, MakeSettings, ResourceUpdates, stdio, text_of, wait_until

pytestmark = pytest.mark.integration

FIXTURE = REPO / "tests" / "conformance" / "fixture_server.py"
ROOT = "file:///work/project"


@pytest.fixture(params=["legacy", "auto"], ids=["downstream-2025", "downstream-auto"])
def relay_settings(request: pytest.FixtureRequest, make_settings: MakeSettings) -> Any:
    entry = {"command": sys.executable, "args": [str(FIXTURE), "--stdio"], "cwd": str(REPO), "protocol": request.param}
    return make_settings({"fx": entry, "plain": stdio("ok", "plain")})


class Answers:
    """Client-side callbacks that answer like a user and an LLM would, and remember what they saw."""

    def __init__(self, elicit_action: str = "accept") -> None:
        self.elicit_action = elicit_action
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.sampled: list[types.CreateMessageRequestParams] = []

    async def sampling(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris, says the client"), model="test-llm"
        )

    async def elicitation(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if self.elicit_action != "accept":
            return types.ElicitResult(action=self.elicit_action)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content={"username": "bo", "email": "bo@example.com"})

    async def roots(self, ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=ROOT, name="project")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    def client_kwargs(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.roots,
            "logging_callback": self.log,
            "log_level": "debug",
        }


async def test_sampling_reaches_the_client_and_its_answer_the_server(connect: Connect, relay_settings: Any) -> None:
    answers = Answers()
    async with connect(relay_settings, **answers.client_kwargs()) as client:
        result = await client.call_tool("fx__test_sampling", {"prompt": "Capital of France?"})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "LLM response: Paris, says the client"
    assert answers.sampled[0].messages[0].content.text == "Capital of France?"  # type: ignore[union-attr]


@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_elicitation_is_answered_or_declined_by_the_client(
    connect: Connect, relay_settings: Any, action: str
) -> None:
    answers = Answers(elicit_action=action)
    async with connect(relay_settings, **answers.client_kwargs()) as client:
        result = await client.call_tool("fx__test_elicitation", {"message": "Who are you?"})
    assert not result.is_error, text_of(result)
    assert f"action={action}" in text_of(result)
    if action == "accept":
        assert '"username": "bo"' in text_of(result)


async def test_roots_come_from_the_client(connect: Connect, relay_settings: Any) -> None:
    answers = Answers()
    async with connect(relay_settings, **answers.client_kwargs()) as client:
        result = await client.call_tool("fx__test_input_required_result_list_roots", {})
    assert text_of(result) == f"Roots: {ROOT}"


async def test_progress_reaches_the_client(connect: Connect, relay_settings: Any) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async with connect(relay_settings) as client:
        result = await client.call_tool("fx__test_tool_with_progress", {}, progress_callback=progress)
    assert text_of(result) == "Tool with progress executed successfully"
    assert [value for value, _, _ in seen] == [0, 50, 100]
    assert all(total == 100 for _, total, _ in seen)


async def test_log_messages_reach_the_client(connect: Connect, relay_settings: Any) -> None:
    answers = Answers()
    async with connect(relay_settings, **answers.client_kwargs()) as client:
        if client.protocol_version == "2025-11-25":
            with warnings.catch_warnings():  # logging/setLevel is deprecated in 2026-07-28, current in 2025-11-25
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level("debug")
        result = await client.call_tool("fx__test_tool_with_logging", {})
        await wait_until(lambda: len(answers.logs) >= 3, timeout=5)
    assert text_of(result) == "Tool with logging executed successfully"
    assert [log.data for log in answers.logs[:3]] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]


async def test_a_client_without_sampling_gets_a_clear_error(connect: Connect, relay_settings: Any) -> None:
    # A 2026-07-28 downstream refuses with -32021 itself; a 2025-11-25 one passes on the hub's refusal.
    async with connect(relay_settings) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("fx__test_sampling", {"prompt": "anyone?"})
    error = refused.value
    assert error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY or "does not support sampling" in error.message


async def test_cancelling_a_call_stops_the_downstream_work(
    connect: Connect, relay_settings: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled.txt"
    async with connect(relay_settings) as client:
        await client.call_tool("plain__echo", {"text": "warm up"})  # the server runs, so the cancel has a target
        with anyio.move_on_after(1.0):
            await client.call_tool("plain__sleep_marked", {"seconds": 30, "marker": str(marker)})
        await wait_until(marker.exists, timeout=10)
        assert marker.read_text() == "cancelled"
        again = await client.call_tool("plain__echo", {"text": "still fine"})
    assert text_of(again) == "still fine"


async def test_resource_updates_reach_a_subscribed_client(make_settings: MakeSettings) -> None:
    entry = {"command": sys.executable, "args": [str(FIXTURE), "--stdio"], "cwd": str(REPO), "protocol": "legacy"}
    settings = make_settings({"fx": entry, "plain": stdio("ok", "plain")})
    updates = ResourceUpdates()

    from hanzo_hub.hub.core import Hub
    from hanzo_hub.hub.server import build_server

    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy", message_handler=updates) as c:
        with warnings.catch_warnings():  # resources/subscribe is a 2025-11-25 feature, deprecated in 2026-07-28
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await c.subscribe_resource("hub://fx/test://watched-resource")
        await c.call_tool("fx__test_update_watched_resource", {})
        await updates.wait_for("hub://fx/test://watched-resource")
    assert updates.uris == ["hub://fx/test://watched-resource"]


async def test_a_status_subscription_does_not_break_a_servers_start(make_settings: MakeSettings) -> None:
    """A client subscribed to the hub's own status resource, which no server owns, then to a server's resource: its
    updates arrive, and still do after the server restarts (the hub re-subscribes it to what it owns, and only that:
    the status resource used to break the re-subscription)."""
    from hanzo_hub.hub.core import Hub
    from hanzo_hub.hub.server import build_server
    from hanzo_hub.hub.status import STATUS_URI

    entry = {"command": sys.executable, "args": [str(FIXTURE), "--stdio"], "cwd": str(REPO), "protocol": "legacy"}
    settings = make_settings({"fx": entry, "plain": stdio("ok", "plain")})
    updates = ResourceUpdates()

    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy", message_handler=updates) as c:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await c.subscribe_resource(STATUS_URI)
            await c.subscribe_resource("hub://fx/test://watched-resource")  # fx starts here
        assert hub.resource_subscriptions("fx") == ["test://watched-resource"]
        for _ in range(2):  # then again after a restart, which re-subscribes fx to what it owns
            updates.uris.clear()
            await c.call_tool("fx__test_update_watched_resource", {})
            await updates.wait_for("hub://fx/test://watched-resource")
            await hub.pool.get("fx").stop()


@pytest.mark.parametrize("protocol", ["legacy", "auto"], ids=["downstream-2025", "downstream-auto"])
async def test_resource_updates_reach_a_listening_stateless_client(make_settings: MakeSettings, protocol: str) -> None:
    from mcp.shared.subscriptions import ResourceUpdated

    from hanzo_hub.hub.core import Hub
    from hanzo_hub.hub.server import build_server

    entry = {"command": sys.executable, "args": [str(FIXTURE), "--stdio"], "cwd": str(REPO), "protocol": protocol}
    settings = make_settings({"fx": entry, "plain": stdio("ok", "plain")})
    uri = "hub://fx/test://watched-resource"
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            await client.call_tool("fx__test_update_watched_resource", {})
            with anyio.fail_after(10):
                async for event in subscription:
                    if isinstance(event, ResourceUpdated):
                        break
    assert event.uri == uri


async def test_completions_come_from_the_owning_server(connect: Connect, relay_settings: Any) -> None:
    async with connect(relay_settings) as client:
        prompt = await client.complete(
            types.PromptReference(type="ref/prompt", name="fx__test_prompt_with_arguments"),
            {"name": "arg1", "value": "par"},
        )
        template = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="hub://fx/test://template/{id}/data"),
            {"name": "id", "value": "4"},
        )
    assert prompt.completion.values == ["paris", "park", "party"]
    assert template.completion.values == ["456"]
