"""The raw ``tools/call`` fast path: same answers as a direct connection, and the relay still works through it.

The downstream is a real subprocess, in the handshake era (``protocol: legacy``) or the stateless one (``auto``: the
fixtures speak 2026-07-28); the client is a handshake-era SDK client on the hub's front server. Each test checks that
the call really took the fast path (its counter).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from hanzo_hub.backends.supervisor import Supervisor
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.fastcall import RawToolCalls
from hanzo_hub.hub.server import build_server
from tests.conftest import FIXTURE, REPO, MakeSettings, inproc, stdio, text_of, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CONFORMANCE = REPO / "tests" / "conformance" / "fixture_server.py"
ERAS = pytest.mark.parametrize("era", ["legacy", "auto"])


def conformance(era: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(CONFORMANCE), "--stdio"], "cwd": str(REPO), "protocol": era}


def assert_era(hub: Hub, server: str, era: str) -> None:
    """The downstream really speaks the era under test."""
    client = hub.pool.get(server).client
    assert client is not None
    assert (client.protocol_version == "2026-07-28") is (era == "auto")


@asynccontextmanager
async def hub_client(settings: Any, **kwargs: Any) -> AsyncIterator[tuple[Client, RawToolCalls]]:
    async with Hub.open(settings) as hub:
        server = build_server(hub)
        fast = next(m for m in server.middleware if isinstance(m, RawToolCalls))
        async with Client(server, mode="legacy", **kwargs) as client:
            yield client, fast
            for name, spec in hub.servers.items():
                if hub.pool.get(name).client is not None and spec.kind == "stdio":
                    assert_era(hub, name, spec.protocol if spec.protocol == "legacy" else "auto")


def _wire(result: types.CallToolResult) -> dict[str, Any]:
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("_meta", None)
    return body


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"text": "héllo, hub"}),
    ("add", {"a": 2, "b": 40}),
    ("image", {}),
    ("audio", {}),
    ("embedded", {}),
    ("fail", {"reason": "as asked"}),
    ("echo", {}),  # invalid arguments: the downstream's own error result comes back unchanged
]


@ERAS
async def test_fast_results_equal_direct_results(make_settings: MakeSettings, era: str) -> None:
    settings = make_settings({"ds": stdio("ok", "ds", protocol=era), "other": inproc("beta")})
    direct_params = StdioServerParameters(command=sys.executable, args=["-m", FIXTURE, "ok", "ds"], cwd=str(REPO))
    async with hub_client(settings) as (client, fast), Client(direct_params, mode="legacy") as direct:
        await client.call_tool("ds__echo", {"text": "start"})  # the first call starts the server (normal path)
        before = fast.fast_calls
        for tool, arguments in CALLS:
            through = await client.call_tool(f"ds__{tool}", arguments)
            expected = await direct.call_tool(tool, arguments)
            assert _wire(through) == _wire(expected), tool
        assert fast.fast_calls == before + len(CALLS)


@ERAS
async def test_stateless_clients_are_fast_unless_the_era_bridge_may_be_needed(
    make_settings: MakeSettings, era: str
) -> None:
    settings = make_settings({"fx": conformance(era), "other": inproc("beta")})

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model"
        )

    async with Hub.open(settings) as hub:
        server = build_server(hub)
        fast = next(m for m in server.middleware if isinstance(m, RawToolCalls))
        async with Client(server, mode="auto") as plain:
            assert plain.protocol_version == "2026-07-28"
            await plain.call_tool("fx__test_simple_text", {})
            before = fast.fast_calls
            result = await plain.call_tool("fx__test_simple_text", {})
            assert fast.fast_calls == before + 1  # declares no sampling, elicitation or roots: nothing to bridge
            assert result.result_type == "complete"
            assert text_of(result) == "This is a simple text response for testing."
            assert_era(hub, "fx", era)
        async with Client(server, mode="auto", sampling_callback=sampling) as sampler:
            before = fast.fast_calls
            sampled = await sampler.call_tool("fx__test_sampling", {"prompt": "Capital of France?"})
            assert fast.fast_calls == before  # the era bridge turned the server's request into an input round
        assert "Paris" in text_of(sampled)
        async with Client(server, mode="legacy") as legacy:
            with pytest.raises(Exception, match="nope"):
                await legacy.call_tool("other__nope", {})


async def test_progress_tokens_take_the_normal_path_and_progress_arrives(make_settings: MakeSettings) -> None:
    entry = {"command": sys.executable, "args": [str(CONFORMANCE), "--stdio"], "cwd": str(REPO), "protocol": "legacy"}
    settings = make_settings({"fx": entry, "other": inproc("beta")})
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with hub_client(settings) as (client, fast):
        await client.call_tool("fx__test_simple_text", {})
        before = fast.fast_calls
        await client.call_tool("fx__test_tool_with_progress", {}, progress_callback=on_progress)
        assert fast.fast_calls == before
    assert seen


@ERAS
async def test_sampling_and_logs_during_a_fast_call_reach_this_client(make_settings: MakeSettings, era: str) -> None:
    entry = conformance(era)
    settings = make_settings({"fx": entry, "other": inproc("beta")})
    prompts: list[str] = []
    logs: list[Any] = []

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        content = params.messages[0].content
        prompts.append(content.text if isinstance(content, types.TextContent) else "")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model"
        )

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with hub_client(settings, sampling_callback=sampling, logging_callback=log) as (client, fast):
        await client.call_tool("fx__test_simple_text", {})
        before = fast.fast_calls
        result = await client.call_tool("fx__test_sampling", {"prompt": "Capital of France?"})
        await client.call_tool("fx__test_tool_with_logging", {})
        assert fast.fast_calls == before + 2
    assert prompts == ["Capital of France?"]
    assert "Paris" in text_of(result)
    assert logs


@ERAS
async def test_a_crash_during_a_fast_call_is_an_error_result_and_the_server_restarts(
    make_settings: MakeSettings,
    era: str,
) -> None:
    settings = make_settings({"ds": stdio("ok", "ds", protocol=era), "other": inproc("beta")})
    async with hub_client(settings) as (client, fast):
        await client.call_tool("ds__echo", {"text": "start"})
        before = fast.fast_calls
        crashed = await client.call_tool("ds__crash", {})
        assert crashed.is_error
        assert "ds" in text_of(crashed)
        assert fast.fast_calls == before  # an error result made by the hub, not a relayed one
        again = await client.call_tool("ds__echo", {"text": "back"})
        assert text_of(again) == "back"


@ERAS
async def test_the_per_call_policy_applies_on_the_fast_path(make_settings: MakeSettings, era: str) -> None:
    policy = {"sandbox": "none", "defaults": {"max_result_bytes": 200, "rate_per_minute": 1, "burst": 4}}
    policy["tools"] = {"fail": {"enabled": False}}
    sandbox = {"keyring_service": None, "servers": {"ds": policy}}
    settings = make_settings({"ds": stdio("ok", "ds", protocol=era), "other": inproc("beta")}, sandbox=sandbox)
    async with hub_client(settings) as (client, fast):
        await client.call_tool("ds__echo", {"text": "start"})
        before = fast.fast_calls
        small = await client.call_tool("ds__echo", {"text": "small"})
        big = await client.call_tool("ds__echo", {"text": "x" * 5000})
        disabled = await client.call_tool("ds__fail", {"reason": "r"})
        spent = [await client.call_tool("ds__echo", {"text": "again"}) for _ in range(3)]
        relayed = fast.fast_calls - before
    assert text_of(small) == "small"
    assert "x" * 300 not in text_of(big)
    assert "truncated by policy" in text_of(big)
    assert disabled.is_error
    assert "policy denied" in text_of(disabled)
    assert any(r.is_error and "policy denied" in text_of(r) for r in spent)  # the bucket of 4 ran dry
    # Relayed: small, big and the calls the bucket still allowed; the denied ones never reached the server.
    assert relayed == 2 + sum(not r.is_error for r in spent)


@ERAS
@pytest.mark.parametrize("which", ["policy", "server"])
async def test_a_fast_call_past_its_deadline_is_an_error_and_the_server_is_told_to_cancel(
    make_settings: MakeSettings, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, which: str, era: str
) -> None:
    # The raw channel's timer keeps the sooner of the policy's per-call timeout and the server's call timeout.
    entry = stdio("ok", "ds", protocol=era, call_timeout=0.4 if which == "server" else 30)
    sandbox = {"keyring_service": None, "servers": {"ds": {"sandbox": "none", "tools": {"sleep_marked": {}}}}}
    if which == "policy":
        sandbox["servers"]["ds"]["tools"]["sleep_marked"] = {"timeout": 0.4}
    settings = make_settings({"ds": entry, "other": inproc("beta")}, sandbox=sandbox)
    raw_calls: list[str] = []
    original = Supervisor.raw_request

    async def counted(self: Supervisor, *args: Any) -> Any:
        raw_calls.append(self.name)
        return await original(self, *args)

    monkeypatch.setattr(Supervisor, "raw_request", counted)
    marker = tmp_path / "cancelled"
    async with hub_client(settings) as (client, _fast):
        await client.call_tool("ds__echo", {"text": "start"})  # starts the server (normal path)
        raw_calls.clear()
        with anyio.fail_after(10):
            late = await client.call_tool("ds__sleep_marked", {"seconds": 30, "marker": str(marker)})
        await wait_until(marker.exists)  # the downstream saw notifications/cancelled
        after = await client.call_tool("ds__echo", {"text": "still here"})
    assert raw_calls == ["ds", "ds"]  # both calls went over the raw channel
    assert late.is_error
    expected = "timed out after 0.4 s" if which == "policy" else "did not answer within 0.4 s"
    assert expected in text_of(late)
    assert marker.read_text() == "cancelled"
    assert text_of(after) == "still here"


async def test_the_policy_timeout_covers_the_first_leg_and_the_input_rounds_together(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stateless-era server answers the first leg with an input request; the rounds that follow get what is left
    # of the call's budget, not a fresh one. Each leg alone fits the 1.5 s timeout; both together (1.6 s) do not.
    sandbox = {"keyring_service": None, "servers": {"fx": {"sandbox": "none", "tools": {"test_sampling": {}}}}}
    sandbox["servers"]["fx"]["tools"]["test_sampling"] = {"timeout": 1.5}
    settings = make_settings({"fx": conformance("auto"), "other": inproc("beta")}, sandbox=sandbox)
    original = Supervisor.raw_request
    slow_first_leg = False

    async def delayed(self: Supervisor, *args: Any) -> Any:
        if slow_first_leg:
            await anyio.sleep(0.8)  # a downstream slow to ask: the hub's raw leg takes 0.8 s of the budget
        return await original(self, *args)

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        await anyio.sleep(0.8)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model"
        )

    monkeypatch.setattr(Supervisor, "raw_request", delayed)
    async with hub_client(settings, sampling_callback=sampling) as (client, _fast):
        quick = await client.call_tool("fx__test_sampling", {"prompt": "Capital of France?"})
        slow_first_leg = True
        with anyio.fail_after(10):
            late = await client.call_tool("fx__test_sampling", {"prompt": "Capital of France?"})
        slow_first_leg = False
        after = await client.call_tool("fx__test_simple_text", {})
    assert "Paris" in text_of(quick)  # the rounds alone fit
    assert late.is_error
    assert "timed out after 1.5 s" in text_of(late)
    assert not after.is_error


@ERAS
async def test_an_answer_over_the_message_cap_is_an_error_and_the_server_keeps_serving(
    make_settings: MakeSettings, era: str
) -> None:
    # backends.max_message_bytes: an answer too long to take is dropped as it streams in, and the call gets an error
    # at once instead of waiting out its timeout (or the hub holding the whole line in memory).
    entry = stdio("ok", "ds", protocol=era)
    settings = make_settings({"ds": entry, "other": inproc("beta")}, backends={"max_message_bytes": 64 * 1024})
    async with hub_client(settings) as (client, _fast):
        pid = text_of(await client.call_tool("ds__pid", {}))
        with anyio.fail_after(10):
            try:
                big = await client.call_tool("ds__echo", {"text": "x" * 100_000})
                message = text_of(big)
                assert big.is_error
            except MCPError as exc:  # a JSON-RPC error where the downstream's answer was one
                message = exc.error.message
        assert "server 'ds' answered with more than 65536 bytes" in message
        small = await client.call_tool("ds__echo", {"text": "x" * 30_000})
        assert text_of(small) == "x" * 30_000
        assert text_of(await client.call_tool("ds__pid", {})) == pid  # the same process: nothing restarted
