"""A full disk under the hub's home loses no call and no answer: the hub serves, warns once per file, stops cleanly.

The home is a real 1 MiB tmpfs filled to the last byte (root only, as dockerd and bwrap tests are), so every write
under it fails with ENOSPC the way a full disk does: snapshots, the audit file, server logs, the LLM gateway's usage
ledger, request log and feedback file.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc, mounted_tmpfs, stdio
from tests.hub.llm_support import BACKENDS, NO_MEMORY, llm_section
from tests.llm.providers_server import Answer, ProviderServer, _provider_server_module, provider_server  # noqa: F401

POLICED = {"target": "tests.fixtures.policed:build"}


def _write_until_full(fd: int, block: bytes) -> None:
    while True:
        try:
            os.write(fd, block)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            return


class SmallDisk:
    """A mounted 1 MiB tmpfs that ``fill`` makes full and ``free`` empties again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for block in (b"\0" * 4096, b"\0"):  # whole pages, then the last bytes
                _write_until_full(fd, block)
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink()

    def home_for(self, settings: HubSettings) -> HubSettings:
        return settings.model_copy(update={"home": self.path / "home"})


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with mounted_tmpfs(tmp_path / "disk", "size=1m") as mount:
        yield SmallDisk(mount)


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def messages(caplog: pytest.LogCaptureFixture, fragment: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if fragment in r.getMessage()]


async def test_calls_work_on_a_full_disk_and_the_hub_stops_cleanly(
    small_disk: SmallDisk, make_settings: MakeSettings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sandbox = {"roots": {"*": [str(tmp_path)]}, "servers": {"policed": {"category": "web"}}}
    settings = small_disk.home_for(make_settings({"policed": POLICED, "down": stdio()}, sandbox=sandbox))
    small_disk.fill()
    with caplog.at_level(logging.INFO):
        async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            echo = await client.call_tool("down__echo", {"text": "still here"})
            first = await client.call_tool("policed__big", {"size": 10})
            second = await client.call_tool("policed__big", {"size": 20})
        # leaving the hub flushed and closed the audit file: the old RotatingFileHandler raised here
    assert {"down__echo", "policed__big"} <= names
    assert text(echo) == "still here"
    assert not first.is_error
    assert not second.is_error
    assert len(messages(caplog, "cannot write the audit file")) == 1
    assert messages(caplog, "could not write the snapshot of server down")
    assert not any(r.exc_info for r in caplog.records if r.name.startswith("hanzo_hub"))  # warnings, no tracebacks

    small_disk.free()
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.call_tool("policed__big", {"size": 30})
        await client.call_tool("down__echo", {"text": "listed live again"})
        snapshot = hub.snapshots.load("down")
    assert snapshot is not None  # with room again, the live listing was saved
    assert snapshot.source == "snapshot"
    lines = (settings.log_dir / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    # the two calls since the disk has room; a line cut short by the full disk was ended first, so these are whole
    recent = [json.loads(line) for line in lines[-2:]]
    assert [(r["server"], r["tool"], r["verdict"]) for r in recent] == [
        ("policed", "big", "allow"),
        ("down", "echo", "allow"),
    ]


async def test_a_paid_answer_reaches_the_caller_on_a_full_disk(
    small_disk: SmallDisk,
    make_settings: MakeSettings,
    provider_server: ProviderServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider_server.script("p", Answer("four", usage=(1000, 200)))
    base = make_settings({"alpha": inproc("alpha")}, llm=llm_section(provider_server), backends=BACKENDS,
                         memory=NO_MEMORY)  # fmt: skip
    settings = small_disk.home_for(base)
    (settings.home / "llm").mkdir(parents=True)
    small_disk.fill()
    with caplog.at_level(logging.INFO):
        async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
            result = await client.call_tool("llm__complete", {"prompt": "2+2?", "max_tokens": 50})
            out: dict[str, Any] = result.structured_content or {}
            rated = await client.call_tool("llm__feedback", {"request_id": out.get("request_id"), "rating": 0.9})
            spent = hub.llm.ledger.totals(f"user:{settings.user}")
    assert not result.is_error, text(result)
    assert text(result) == "four"
    assert spent.requests == 1  # the spend still counts toward budgets in this process, though the ledger is full
    assert not rated.is_error, text(rated)  # the rating was used; only saving it failed
    assert messages(caplog, "cannot write the usage ledger")
    assert messages(caplog, "cannot write the request log")
    assert messages(caplog, "router state was not saved")


async def test_tool_search_keeps_working_and_memory_recovers_once_there_is_room(
    small_disk: SmallDisk, make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = small_disk.home_for(
        make_settings(
            {"alpha": inproc("alpha"), "beta": inproc("beta")},
            memory={"enabled": True, "embedder": "fake", "store": "chroma"},
            exposure={"mode": "search", "embedder": "fake", "index_store": "chroma"},
        )
    )
    note = {"content": "The deploy key lives in the vault", "tier": "project"}
    small_disk.fill()
    with caplog.at_level(logging.INFO):
        async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
            found = await client.call_tool("find_tools", {"query": "add two integers together"})
            refused = await client.call_tool("memory__remember", note)
            session = await client.call_tool("memory__remember", {**note, "tier": "session"})
            small_disk.free()
            stored = await client.call_tool("memory__remember", note)  # the same running hub, now with room
            recalled = await client.call_tool("memory__recall", {"query": "where is the deploy key", "tier": "project"})
    # The Chroma tool index could not open: search falls back to an in-memory index instead of failing.
    assert not found.is_error, text(found)
    assert "alpha__add" in text(found)
    assert messages(caplog, "tool index unusable")
    # Memory refuses a write it cannot keep, with the reason; the session tier lives in memory and still works.
    assert refused.is_error
    assert "disk is full" in text(refused)
    assert not session.is_error, text(session)
    # Once the disk has room the store opens (chromadb's cached broken system is dropped) without a restart.
    assert not stored.is_error, text(stored)
    assert "deploy key" in text(recalled)
