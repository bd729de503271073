"""Every first-party manifest starts over stdio as its manifest says, and lists exactly its packaged tools.json."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from hanzo_hub.catalog.loader import entry_spec, load_catalog
from hanzo_hub.catalog.probe import diff_tools, live_tools
from hanzo_hub.config import load_settings

pytestmark = pytest.mark.timeout(120)


def _first_party_ids() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        catalog = load_catalog(load_settings(home=Path(tmp)))
    return sorted(i for i, e in catalog.entries.items() if e.meta.origin == "first-party")


@pytest.mark.anyio
@pytest.mark.parametrize("server_id", _first_party_ids())
async def test_first_party_server_lists_its_snapshot(server_id: str, tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path)
    entry = load_catalog(settings).entries[server_id]
    assert entry.tools is not None, f"{server_id} has no tools.json (scripts/snapshot-manifest {server_id})"
    live = await live_tools(entry_spec(settings, entry), entry.meta.launch.startup_timeout_seconds)
    difference = diff_tools(entry.tools, live)
    assert difference.same, f"{server_id} drifted from tools.json: {difference} (scripts/snapshot-manifest {server_id})"
    assert live.sha256 == entry.tools.sha256
