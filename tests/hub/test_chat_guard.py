"""``chat``'s tool calls under the full policy guard: the real hub over HTTP with two token users, the real gateway
against the scripted loopback provider server (its model asks for many tool calls), and the recording downstream
``tests.fixtures.policed`` as a policed server.

The guard files each call the pipeline makes like the client's own: the client's session budget (not one shared by
every chat user), the user's rate limits, one ``chat`` call as one turn for the per-turn budget, and audit lines
naming the user and the session.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, cast

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.guard import TURN_KEY
from hanzo_hub.transports.auth import token_digest
from tests.conftest import MakeSettings, serve_http_in_process, text_of
from tests.fixtures.policed import CALLS
from tests.hub.llm_support import BACKENDS, FAKE, NO_MEMORY, llm_section
from tests.llm.providers_server import Answer, ProviderServer, _provider_server_module, provider_server

__all__ = ["_provider_server_module", "provider_server"]

TOKENS = {"bob": "hh-test-token-chatguard-bob", "alice": "hh-test-token-chatguard-alice"}
AUTH = {"tokens": [{"user": user, "sha256": token_digest(token)} for user, token in TOKENS.items()]}


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()


def _settings(make_settings: MakeSettings, provider_server: ProviderServer, **sandbox: Any) -> HubSettings:
    """``policed`` (the recording server) with a policy; generous rates unless ``defaults`` says otherwise."""
    defaults = {"rate_per_minute": 6000, "burst": 1000, **sandbox.pop("defaults", {})}
    body = {"keyring_service": None, "servers": {"policed": {"defaults": defaults}}, **sandbox}
    return make_settings(
        {"policed": {"target": "tests.fixtures.policed:build"}},
        llm=llm_section(provider_server),
        backends=BACKENDS,
        memory=NO_MEMORY,
        exposure=FAKE,
        sandbox=body,
        auth=AUTH,
    )


@asynccontextmanager
async def _session(url: str, user: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """One client session of ``user`` (bearer token) with the hub at ``url``."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[user]}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def _echoes(tag: str, n: int) -> Answer:
    """A model answer asking for ``n`` calls of ``echo`` (texts ``tag0``, ``tag1``, ...)."""
    return Answer(tool_calls=tuple((f"{tag}{i}", "echo", {"text": f"{tag}{i}"}) for i in range(n)))


def _turn(name: str) -> types.RequestParamsMeta:
    """The ``_meta`` naming the client's model turn."""
    return cast(types.RequestParamsMeta, {TURN_KEY: name})


async def _chat(client: Client, meta: types.RequestParamsMeta | None = None) -> dict[str, Any]:
    result = await client.call_tool(
        "llm__chat", {"message": "echo some things", "model": "small", "use_memory": False}, meta=meta
    )
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return dict(result.structured_content)


def _failed(out: dict[str, Any]) -> list[bool]:
    return [call["is_error"] for call in out["tool_calls"]]


def _tool_messages(provider_server: ProviderServer, request: int) -> list[str]:
    """The tool results the model got in provider request number ``request``."""
    body = provider_server.requests("p")[request].body
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def _audit(settings: HubSettings) -> list[dict[str, Any]]:
    lines = (settings.log_dir / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


async def test_chat_users_have_their_own_session_budgets_and_the_audit_names_them(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script(
        "p",
        _echoes("b", 3), Answer("bob done"),
        _echoes("a", 3), Answer("alice done"),
        _echoes("x", 1), Answer("bob refused"),
    )  # fmt: skip
    settings = _settings(make_settings, provider_server, calls_per_session=3)
    async with serve_http_in_process(settings) as url, _session(url, "bob") as bob:
        first = await _chat(bob)
        async with _session(url, "alice") as alice:
            second = await _chat(alice)
        over_direct = await bob.call_tool("echo", {"text": "direct"})
        over_chat = await _chat(bob)
    assert _failed(first) == [False, False, False]
    assert _failed(second) == [False, False, False]  # one shared "default" session would have had no budget left
    assert over_direct.is_error
    assert "(session_budget)" in text_of(over_direct)  # bob's chat calls spent bob's session budget
    assert _failed(over_chat) == [True]
    [refusal] = _tool_messages(provider_server, 5)
    assert "policy denied policed/echo (session_budget)" in refusal
    assert [c[1]["text"] for c in CALLS] == ["b0", "b1", "b2", "a0", "a1", "a2"]
    records = [r for r in _audit(settings) if r["server"] == "policed"]
    assert [(r["user"], r["verdict"]) for r in records] == [
        *[("bob", "allow")] * 3, *[("alice", "allow")] * 3, ("bob", "deny"), ("bob", "deny"),
    ]  # fmt: skip
    bobs = {r["session"] for r in records if r["user"] == "bob"}
    alices = {r["session"] for r in records if r["user"] == "alice"}
    assert len(bobs) == len(alices) == 1
    assert bobs != alices
    assert "default" not in bobs | alices
    # the chat calls carry the very session id bob's own calls (the chat call included) are audited under
    chat_calls = [r for r in _audit(settings) if (r["server"], r["tool"], r["user"]) == ("llm", "chat", "bob")]
    assert {r["session"] for r in chat_calls} == bobs


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_one_chat_call_is_one_turn_for_the_per_turn_limit(
    make_settings: MakeSettings, provider_server: ProviderServer, mode: str
) -> None:
    provider_server.script("p", _echoes("t", 5), Answer("three of five"), _echoes("n", 3), Answer("all three"))
    settings = _settings(make_settings, provider_server, calls_per_turn=3)
    async with serve_http_in_process(settings) as url, _session(url, "bob", mode) as bob:
        before = [await bob.call_tool("echo", {"text": f"d{i}"}, meta=_turn("t1")) for i in range(2)]
        limited = await _chat(bob, meta=_turn("t1"))  # the chat call itself is the 3rd call of turn t1
        after = await bob.call_tool("echo", {"text": "d2"}, meta=_turn("t1"))
        fresh = await _chat(bob)
    assert not any(r.is_error for r in before)
    assert _failed(limited) == [False, False, False, True, True]
    refusals = _tool_messages(provider_server, 1)[3:]
    assert len(refusals) == 2
    assert all("policy denied policed/echo (turn_budget)" in text for text in refusals)
    assert "at most 3 tool calls per turn" in refusals[0]
    assert limited["answer"] == "three of five"  # the model got the refusals and answered
    # the chat's own turn neither reset nor spent the client's turn t1: it is still full
    assert after.is_error
    assert "(turn_budget)" in text_of(after)
    assert _failed(fresh) == [False, False, False]  # a new chat call is a new turn
    assert [c[1]["text"] for c in CALLS] == ["d0", "d1", "t0", "t1", "t2", "n0", "n1", "n2"]
    sessions = [r["session"] for r in _audit(settings) if r["server"] == "policed"]
    direct, chats = sessions[:2] + sessions[7:8], sessions[2:7] + sessions[8:]
    if mode == "legacy":  # the chat calls are filed under bob's client session, as his own calls are
        assert len(set(sessions)) == 1
    else:  # a stateless client has no session: each turn (a chat call's included) is its own unit, per user
        assert set(direct) == {"bob#turn:t1"}
        assert all(s.startswith("bob#turn:chat-") for s in chats)
        assert len(set(chats[:5])) == len(set(chats[5:])) == 1
        assert chats[0] != chats[-1]


async def test_chat_tool_calls_spend_the_asking_users_rate_limit(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", _echoes("b", 3), Answer("bob limited"), _echoes("a", 2), Answer("alice fine"))
    settings = _settings(make_settings, provider_server, defaults={"rate_per_minute": 1, "burst": 2})
    async with serve_http_in_process(settings) as url:
        async with _session(url, "bob") as bob:
            limited = await _chat(bob)
        async with _session(url, "alice") as alice:
            fine = await _chat(alice)
    assert _failed(limited) == [False, False, True]
    [*_, refusal] = _tool_messages(provider_server, 1)
    assert "policy denied policed/echo (rate)" in refusal
    assert _failed(fine) == [False, False]  # alice's bucket is her own
    records = [(r["user"], r["verdict"], r["limit"]) for r in _audit(settings) if r["server"] == "policed"]
    assert records == [
        ("bob", "allow", None), ("bob", "allow", None), ("bob", "deny", "rate"),
        ("alice", "allow", None), ("alice", "allow", None),
    ]  # fmt: skip
