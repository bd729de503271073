"""``hanzo-hub tools search``: ranks the snapshot tools of configured servers without starting any of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio

from hanzo_hub.hub.core import Hub
from tests.conftest import REPO, MakeSettings, inproc


def test_tools_search_ranks_snapshot_tools(make_settings: MakeSettings, hub_home: Path) -> None:
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})

    async def take_snapshots() -> None:
        async with Hub.open(settings) as hub:
            await hub.list_tools()

    anyio.run(take_snapshots)
    assert settings.config_file is not None
    argv = [sys.executable, "-m", "hanzo_hub", "tools", "search", "add two integers", "--json", "--embedder", "fake"]
    argv += ["--config", str(settings.config_file), "--home", str(hub_home)]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    body = json.loads(result.stdout)
    names = [tool["name"] for tool in body["tools"]]
    assert names[0].endswith("__add")
    assert 0 < len(names) <= 15
    assert body["tokens"] < body["all_tools_tokens"]
    assert body["llm_filter"] == "skipped"
    assert body["query_adapter"] is False  # the bundled map is for MiniLM, not the hashing embedder


def test_tools_search_in_a_profile(make_settings: MakeSettings, hub_home: Path) -> None:
    exposure = {"profiles": {"b": {"servers": ["beta"]}}}
    settings = make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")}, exposure=exposure)

    async def take_snapshots() -> None:
        async with Hub.open(settings) as hub:
            await hub.list_tools()

    anyio.run(take_snapshots)
    assert settings.config_file is not None
    base = [sys.executable, "-m", "hanzo_hub", "tools", "search", "add two integers", "--json", "--embedder", "fake"]
    base += ["--config", str(settings.config_file), "--home", str(hub_home)]
    result = subprocess.run([*base, "--profile", "b"], cwd=REPO, capture_output=True, text=True, timeout=120)
    names = [tool["name"] for tool in json.loads(result.stdout)["tools"]]
    assert names[0] == "beta__add"
    assert all(name.startswith("beta__") for name in names)
    unknown = subprocess.run([*base, "--profile", "zz"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2
    assert "unknown profile 'zz'" in unknown.stderr
