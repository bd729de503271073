"""Search mode on a fresh home: shipped vectors seed the index, the warm-up runs in the hub's task group."""

from __future__ import annotations

import logging

import anyio
import pytest
from mcp import Client

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc

SYNCED = "tool index synced"


class _OnMessage(logging.Handler):
    """Sets an event when a record starting with ``prefix`` is logged (the warm-up logs from the event loop)."""

    def __init__(self, prefix: str, event: anyio.Event) -> None:
        super().__init__(logging.INFO)
        self.prefix = prefix
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.prefix):
            self.event.set()


def _synced(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(SYNCED)]


@pytest.mark.model
async def test_first_find_tools_embeds_only_the_configured_servers(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    exposure = {"mode": "search", "embedder": "sentence-transformers", "warm_index": False}
    settings = make_settings({"alpha": inproc("alpha")}, exposure=exposure, catalog={"enabled": ["api"]})
    caplog.set_level(logging.INFO, logger="hanzo_hub.selection.dense")
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        alpha = [t for t in await hub.list_tools() if t.name.startswith("alpha__")]
        cataloged = [t for t in await hub.list_tools() if t.name.startswith("api__")]
        found = await client.call_tool("find_tools", {"query": "send an http get request to a url"})
    (line,) = _synced(caplog)
    assert line.startswith(f"{SYNCED}: {len(alpha)} embedded, {len(cataloged)} seeded from shipped vectors")
    assert cataloged
    assert alpha
    assert found.structured_content is not None
    assert "api__http_get" in [tool["name"] for tool in found.structured_content["tools"][:3]]
    assert found.structured_content["query_adapter"] is True  # the bundled map, for the bundled MiniLM


async def test_warm_up_builds_the_index_before_the_first_query_and_stops_cleanly(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, exposure={"mode": "search", "embedder": "fake"})
    caplog.set_level(logging.INFO, logger="hanzo_hub")
    warmed = anyio.Event()
    watch = _OnMessage("tool search warm-up done", warmed)
    logging.getLogger("hanzo_hub.hub.search").addHandler(watch)
    try:
        async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            with anyio.fail_after(20):
                await warmed.wait()
            found = await client.call_tool("find_tools", {"query": "add two integers"})
    finally:
        logging.getLogger("hanzo_hub.hub.search").removeHandler(watch)
    assert listed == ["find_tools", "call_tool"]
    assert len(_synced(caplog)) == 1  # built by the warm-up; the query reused it
    assert found.structured_content is not None
    assert found.structured_content["tools"][0]["name"] == "add"  # one server: no prefix
    assert (settings.home / "tool-index").is_dir()
