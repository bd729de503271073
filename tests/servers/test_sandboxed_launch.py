"""Every first-party server, enabled from the catalog, starts through the hub in the sandbox its manifest declares.

The catalog probe (``test_live_manifests``) runs the servers bare; this is how a user gets them: ``catalog.enabled``,
the hub's sandboxed launch (bubblewrap unless the manifest says otherwise), its grants. Each server must list its
snapshot's tools and answer one real call from inside its sandbox.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from hanzo_hub.catalog.loader import load_catalog
from hanzo_hub.config import load_settings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import FAST_BACKENDS, text_of

pytestmark = [
    pytest.mark.integration,
    pytest.mark.sandbox,
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]

CALLS: dict[str, tuple[str, dict[str, Any], str | None]] = {
    # server: (tool, arguments, text the answer must contain; None: an error result is a fine answer too)
    "system": ("host_info", {}, "python"),
    "devops": ("semver_bump", {"version": "1.2.3", "part": "minor"}, "1.3.0"),
    "code-exec": ("python_syntax_check", {"code": "x = 1\n"}, None),
    "api": ("json_query", {"data": '{"a": {"b": 42}}', "expression": "a.b"}, "42"),
    "web-search": ("web_index_stats", {}, None),
    "data": ("df_list", {}, None),
    "ml": ("ml_list_datasets", {}, "iris"),
    "files": ("tree", {}, "notes.txt"),
    "cloud": ("sts_get_caller_identity", {}, None),
    "comms": ("comms_channels", {}, None),
}


def _first_party() -> list[str]:
    catalog = load_catalog(load_settings(home=Path("/nonexistent-hanzo-home")))
    return sorted(i for i, e in catalog.entries.items() if e.meta.origin == "first-party")


def test_every_first_party_server_has_a_sandboxed_call() -> None:
    assert set(_first_party()) <= set(CALLS), "add a call for each new first-party server"


@pytest.mark.parametrize("server_id", _first_party())
async def test_first_party_server_answers_from_its_sandbox(server_id: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("sandboxed notes\n", encoding="utf-8")
    config = tmp_path / "hub.json"
    body = {"catalog": {"enabled": [server_id], "project": str(project)}, "backends": FAST_BACKENDS}
    body["sandbox"] = {"keyring_service": None}
    config.write_text(json.dumps(body), encoding="utf-8")
    settings = load_settings(config, home=tmp_path / "home")
    entry = load_catalog(settings).entries[server_id]
    assert entry.tools is not None
    tool, arguments, expected = CALLS[server_id]
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool(tool, arguments)
        running = hub.pool.get(server_id).client is not None
    assert listed == set(entry.tools.names)
    assert running, f"{server_id} did not start in its sandbox"
    if expected is not None:
        assert not result.is_error, text_of(result)
        assert expected in text_of(result), text_of(result)
    assert "could not start" not in text_of(result), text_of(result)
