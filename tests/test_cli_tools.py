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


def test_catalog_search_ranks_every_cataloged_server_and_says_which_to_enable(
    make_settings: MakeSettings, hub_home: Path
) -> None:
    own_index = hub_home.parent / "my-tool-index"
    settings = make_settings({}, catalog={"enabled": ["git"]}, exposure={"index_path": str(own_index)})
    assert settings.config_file is not None
    base = [sys.executable, "-m", "hanzo_hub", "tools", "search", "--config", str(settings.config_file)]
    base += ["--home", str(hub_home)]
    query = "show the commit history of this repository"
    found = subprocess.run([*base, "--catalog", "--json", query], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert found.returncode == 0, found.stderr
    rows = json.loads(found.stdout)["tools"]
    assert 0 < len(rows) <= 15
    assert {row["server"] for row in rows} - {"git"}  # servers not enabled are ranked too
    assert all(row["enabled"] == (row["server"] == "git") for row in rows)
    assert any(row["name"] == "git__git_log" for row in rows)
    assert "Loading weights" not in found.stderr  # no progress bar on the console
    text = subprocess.run([*base, "--catalog", query], cwd=REPO, capture_output=True, text=True, timeout=300)
    lines = text.stdout.splitlines()
    assert any(line.split()[1] == "git__git_log" and line.endswith("enabled") for line in lines)
    not_enabled = next(row for row in rows if not row["enabled"])
    assert any(line.endswith(f"hanzo-hub catalog enable {not_enabled['server']}") for line in lines)
    assert sorted(p.name for p in hub_home.iterdir()) == ["models"]  # only the model cache: no snapshots, no index
    assert not own_index.exists()  # the configured index is the hub's own: a catalog search never writes to it
    plain = subprocess.run([*base, "--json", query], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert {row["server"] for row in json.loads(plain.stdout)["tools"]} == {"git"}


def test_search_without_tools_says_how_to_get_some(make_settings: MakeSettings, hub_home: Path) -> None:
    settings = make_settings({})
    assert settings.config_file is not None
    argv = [sys.executable, "-m", "hanzo_hub", "tools", "search", "add two integers", "--config"]
    argv += [str(settings.config_file), "--home", str(hub_home)]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout.strip() == "no tools"
    assert "--catalog" in result.stderr
    assert "hanzo-hub catalog enable" in result.stderr
