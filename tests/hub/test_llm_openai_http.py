"""``/v1/chat/completions`` on the hub's real HTTP app (uvicorn on loopback), with an httpx2 client: plain and
streamed answers from the router, and the same bearer-token check as ``/mcp``."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from hanzo_hub.transports.auth import token_digest
from tests.conftest import MakeSettings, inproc, serve_http_in_process
from tests.hub.llm_support import BACKENDS, MEMORY, NO_MEMORY, llm_section
from tests.llm.providers_server import Answer, ProviderServer, _provider_server_module, provider_server

__all__ = ["_provider_server_module", "provider_server"]

TOKEN = "hh-test-token-for-v1"
BODY: dict[str, Any] = {"messages": [{"role": "user", "content": "say hi"}], "max_tokens": 20}


def _base(mcp_url: str) -> str:
    return mcp_url.rsplit("/", 1)[0]


async def test_chat_completions_answers_with_the_router(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer("hi there", usage=(30, 4)))
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with serve_http_in_process(settings) as url, httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(f"{_base(url)}/v1/chat/completions", json=BODY)
        bad = await http.post(f"{_base(url)}/v1/chat/completions", json={"messages": []})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["model"] == "small"
    assert data["choices"][0]["message"]["content"] == "hi there"
    assert data["usage"] == {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}
    assert "tier order" in data["hanzo"]["reason"]
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_request"


async def test_chat_completions_streams_server_sent_events(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer("streamed answer text", chunks=3))
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with (
        serve_http_in_process(settings) as url,
        httpx2.AsyncClient(timeout=10) as http,
        http.stream("POST", f"{_base(url)}/v1/chat/completions", json={**BODY, "stream": True}) as resp,
    ):
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: ") :]) for line in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "streamed answer text"
    assert len(chunks) >= 3
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["model"] == "small"
    assert provider_server.requests("p")[0].body["stream"] is True


async def test_the_same_request_again_rates_the_earlier_answer_plain_or_streamed(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer("one"), Answer("two"), Answer("three", chunks=2))
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with serve_http_in_process(settings) as url, httpx2.AsyncClient(timeout=10) as http:
        first = (await http.post(f"{_base(url)}/v1/chat/completions", json=BODY)).json()
        second = (await http.post(f"{_base(url)}/v1/chat/completions", json=BODY)).json()
        async with http.stream("POST", f"{_base(url)}/v1/chat/completions", json={**BODY, "stream": True}) as resp:
            assert resp.status_code == 200
            chunks = [line async for line in resp.aiter_lines() if line.startswith("data: {")]
    assert "regenerated" not in first["hanzo"]["reason"]
    assert f"({first['id']}) was rated 0 as regenerated" in second["hanzo"]["reason"]
    lines = [json.loads(line) for line in (settings.home / "llm" / "feedback.jsonl").read_text().splitlines()]
    assert [(x["request_id"], x["implicit"]) for x in lines] == [
        (first["id"], "regenerated"),
        (second["id"], "regenerated"),  # the streamed request asked the same again
    ]
    assert json.loads(chunks[-1][len("data: ") :])["id"] not in {first["id"], second["id"]}


async def test_feedback_over_http_rates_an_answer_once(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY
    )
    async with serve_http_in_process(settings) as url, httpx2.AsyncClient(timeout=10) as http:
        first = (await http.post(f"{_base(url)}/v1/chat/completions", json=BODY)).json()
        other = {**BODY, "messages": [{"role": "user", "content": "say bye"}]}
        second = (await http.post(f"{_base(url)}/v1/chat/completions", json=other)).json()
        feedback = f"{_base(url)}/v1/feedback"
        rated = await http.post(feedback, json={"request_id": first["id"], "rating": 0.9})
        again = await http.post(feedback, json={"request_id": first["id"], "rating": 0.2})
        regenerated = await http.post(feedback, json={"request_id": second["id"], "rating": "regenerated"})
        unknown = await http.post(feedback, json={"request_id": "chatcmpl-nope", "rating": 1})
        bad = [
            await http.post(feedback, json={"request_id": first["id"], "rating": 3}),
            await http.post(feedback, json={"request_id": first["id"], "rating": True}),
            await http.post(feedback, json={"rating": 1}),
            await http.post(feedback, content=b"{not json"),
        ]
    assert rated.status_code == 200, rated.text
    assert rated.json() == {"request_id": first["id"], "model": "small", "quality": 0.9}
    assert again.status_code == 409
    assert "already rated 0.9" in again.json()["error"]["message"]
    assert regenerated.json()["quality"] == 0.0
    assert unknown.status_code == 404
    assert [r.status_code for r in bad] == [400, 400, 400, 400]
    lines = [json.loads(line) for line in (settings.home / "llm" / "feedback.jsonl").read_text().splitlines()]
    assert [(x["request_id"], x["quality"]) for x in lines] == [(first["id"], 0.9), (second["id"], 0.0)]


async def test_chat_completions_needs_a_token_when_auth_is_on(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer("for bob"))
    auth = {"tokens": [{"user": "bob", "sha256": token_digest(TOKEN)}]}
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=NO_MEMORY, auth=auth
    )
    async with serve_http_in_process(settings) as url, httpx2.AsyncClient(timeout=10) as http:
        endpoint = f"{_base(url)}/v1/chat/completions"
        anonymous = await http.post(endpoint, json=BODY)
        wrong = await http.post(endpoint, json=BODY, headers={"Authorization": "Bearer nope"})
        ok = await http.post(endpoint, json=BODY, headers={"Authorization": f"Bearer {TOKEN}"})
        rating = {"request_id": ok.json()["id"], "rating": 1}
        rated_anonymously = await http.post(f"{_base(url)}/v1/feedback", json=rating)
        rated = await http.post(f"{_base(url)}/v1/feedback", json=rating, headers={"Authorization": f"Bearer {TOKEN}"})
    assert rated_anonymously.status_code == 401
    assert rated.status_code == 200, rated.text
    assert anonymous.status_code == 401
    assert wrong.status_code == 401
    assert ok.status_code == 200, ok.text
    assert ok.json()["choices"][0]["message"]["content"] == "for bob"
    assert len(provider_server.requests("p")) == 1  # the refused requests never reached a provider
    usage = (settings.home / "llm" / "usage.jsonl").read_text().splitlines()
    assert [json.loads(line)["user"] for line in usage] == ["bob"]


async def test_chat_completions_without_a_provider_is_503(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha")})
    async with serve_http_in_process(settings) as url, httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(f"{_base(url)}/v1/chat/completions", json=BODY)
        rating = await http.post(f"{_base(url)}/v1/feedback", json={"request_id": "chatcmpl-x", "rating": 1})
    assert response.status_code == 503
    assert "no LLM provider configured" in response.json()["error"]["message"]
    assert rating.status_code == 503


async def test_a_request_over_budget_is_refused_before_any_spend(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    llm = llm_section(provider_server, budgets={"default_user": {"total": "0.000001"}})
    settings = make_settings({"alpha": inproc("alpha")}, llm=llm, backends=BACKENDS, memory=NO_MEMORY)
    async with serve_http_in_process(settings) as url, httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(f"{_base(url)}/v1/chat/completions", json=BODY)
        streamed = await http.post(f"{_base(url)}/v1/chat/completions", json={**BODY, "stream": True})
    assert response.status_code == 402
    assert response.json()["error"]["code"] == "insufficient_quota"
    assert streamed.status_code == 402
    assert provider_server.requests("p") == []


async def _chat_as(url: str, token: str, message: str) -> types.CallToolResult:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        return await client.call_tool("llm__chat", {"message": message, "use_tools": False})


async def _memories_of(url: str, token: str) -> list[str]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        listed = await client.call_tool("memory__list_memories", {"tier": "project"})
    assert listed.structured_content is not None
    return [m["content"] for m in listed.structured_content["memories"]]


async def test_chat_over_http_acts_for_the_token_user(
    make_settings: MakeSettings, provider_server: ProviderServer
) -> None:
    provider_server.script("p", Answer("noted, bob"))
    other = "hh-test-token-for-alice"
    auth = {
        "tokens": [{"user": "bob", "sha256": token_digest(TOKEN)}, {"user": "alice", "sha256": token_digest(other)}]
    }
    settings = make_settings(
        {"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS, memory=MEMORY, auth=auth
    )
    async with serve_http_in_process(settings) as url:
        said = await _chat_as(url, TOKEN, "my locker code is 4711")
        bobs, alices = await _memories_of(url, TOKEN), await _memories_of(url, other)
    assert not said.is_error, said.content
    assert bobs == ["User: my locker code is 4711\nAssistant: noted, bob"]
    assert alices == []
    usage = [json.loads(line) for line in (settings.home / "llm" / "usage.jsonl").read_text().splitlines()]
    assert [(u["user"], u["project"]) for u in usage] == [("bob", "default")]
