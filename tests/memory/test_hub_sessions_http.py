"""The session tier over streamable HTTP: a handshake-era client's HTTP session is its memory session, and it ends
when the client ends the HTTP session."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from hanzo_hub import app
from hanzo_hub.hub.core import Hub
from tests.conftest import MakeSettings, serve_http_in_process, wait_until
from tests.memory._hub import MEMORY, SERVERS, call, listed, session_scopes


async def test_ending_the_http_session_ends_the_memory_session(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Hub] = []

    class Kept(Hub):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(app, "Hub", Kept)
    settings = make_settings(SERVERS, memory=MEMORY)
    async with serve_http_in_process(settings) as url:
        async with Client(url, mode="legacy") as client:
            await call(client, "remember", {"content": "the demo is at three", "tier": "session"})
            seen = await call(client, "list_memories", {"tier": "session"})
            [hub] = made
            assert len(session_scopes(hub)) == 1
        await wait_until(lambda: session_scopes(hub) == [])  # the client's DELETE ended the HTTP session
    assert listed(seen) == ["the demo is at three"]
