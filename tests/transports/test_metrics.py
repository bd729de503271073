"""``/metrics``: what a Prometheus scrape of a serving hub reads after real calls to a real subprocess server that
answers, times out, crashes and restarts; and that the endpoint obeys the hub's authentication."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from hanzo_hub.transports.auth import token_digest
from tests.conftest import MakeSettings, inproc, serve_http_in_process, stdio

pytestmark = pytest.mark.integration


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and sorted labels."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


def value(scrape: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return scrape[name, tuple(sorted(labels.items()))]


async def scrape(endpoint: str, **headers: str) -> httpx2.Response:
    metrics_url = endpoint.rsplit("/", 1)[0] + "/metrics"
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.get(metrics_url, headers=headers)


async def test_a_scrape_counts_every_outcome_and_shows_each_servers_state(make_settings: MakeSettings) -> None:
    settings = make_settings({"down": stdio(call_timeout=1.0), "local": inproc("alpha")})
    async with serve_http_in_process(settings) as url, Client(url) as client:
        await client.list_tools()
        for text in ("a", "b"):
            assert not (await client.call_tool("down__echo", {"text": text})).is_error
        assert (await client.call_tool("down__sleep", {"seconds": 5})).is_error  # past the 1 s call timeout
        assert (await client.call_tool("down__crash", {})).is_error
        assert not (await client.call_tool("down__add", {"a": 1, "b": 2})).is_error  # restarted
        response = await scrape(url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    got = samples(response.text)
    requests = "hanzo_hub_downstream_requests_total"
    assert value(got, requests, server="down", outcome="timeout") == 1
    assert value(got, requests, server="down", outcome="crashed") == 1
    assert value(got, requests, server="down", outcome="ok") >= 3  # the calls, and the listings after each start
    assert value(got, requests, server="down", outcome="unavailable") == 0
    outcomes: Any = sum(value(got, requests, server="down", outcome=o) for o in ("ok", "timeout", "crashed", "error"))
    assert value(got, "hanzo_hub_downstream_request_seconds_count", server="down") == outcomes
    assert value(got, "hanzo_hub_downstream_request_seconds_bucket", server="down", le="0.5") < outcomes
    assert value(got, "hanzo_hub_server_up", server="down") == 1
    assert value(got, "hanzo_hub_server_state", server="down", state="running") == 1
    assert value(got, "hanzo_hub_server_starts_total", server="down") == 2  # the crash cost one restart
    assert value(got, "hanzo_hub_server_circuit_open", server="down") == 0
    assert value(got, "hanzo_hub_tools") >= 10


async def test_metrics_need_a_token_when_the_hub_does(make_settings: MakeSettings) -> None:
    token = "metrics-token-5f1e2d3c4b"
    settings = make_settings(
        {"local": inproc("alpha")}, auth={"tokens": [{"user": "ops", "sha256": token_digest(token)}]}
    )
    async with serve_http_in_process(settings) as url:
        assert (await scrape(url)).status_code == 401
        allowed = await scrape(url, authorization=f"Bearer {token}")
    assert allowed.status_code == 200
    assert "hanzo_hub_server_up" in allowed.text


async def test_metrics_can_be_switched_off(make_settings: MakeSettings) -> None:
    settings = make_settings({"local": inproc("alpha")}, http={"metrics": False})
    async with serve_http_in_process(settings) as url:
        assert (await scrape(url)).status_code == 404
