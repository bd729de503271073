"""``hanzo-hub import``: servers from Claude Desktop, Claude Code, Cursor and VS Code configs in a fake home."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hanzo_hub.catalog.importer import collect, default_sources, file_source, merge_into
from hanzo_hub.cli import main
from hanzo_hub.config import HttpServerSpec, StdioServerSpec, load_settings
from hanzo_hub.errors import ConfigError


def put(path: Path, body: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    return path


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory holding one config of each client (Linux layout: ~/.config)."""
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    home = tmp_path / "user"
    put(
        home / ".config" / "Claude" / "claude_desktop_config.json",
        {
            "mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"]},
                "hub": {"command": "hanzo-hub", "args": ["serve"]},
            }
        },
    )
    put(
        home / ".claude.json",
        {
            "numStartups": 3,
            "mcpServers": {
                "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"GIT_DIR": "/x"}},
                "time": {"command": "other-time"},
                "self-module": {"command": "python", "args": ["-m", "hanzo_hub", "serve"]},
            },
        },
    )
    put(
        home / ".cursor" / "mcp.json",
        {
            "mcpServers": {
                "remote": {"url": "https://example.com/mcp"},
                "nothing": {"description": "neither command nor url"},
                "not-an-object": "npx foo",
            }
        },
    )
    put(
        home / ".config" / "Code" / "User" / "mcp.json",
        {"servers": {"vs-http": {"type": "http", "url": "http://127.0.0.1:3000/mcp"}}, "inputs": []},
    )
    put(
        home / ".config" / "Code" / "User" / "settings.json",
        {"editor.fontSize": 12, "mcp": {"servers": {"vs-settings": {"type": "stdio", "command": "node"}}}},
    )
    return home


def test_collect_takes_every_valid_entry_of_every_client(fake_home: Path) -> None:
    report = collect(default_sources(home=fake_home), existing={})
    assert set(report.taken) == {"time", "git", "remote", "vs-http", "vs-settings"}
    assert len(report.read) == 5
    assert report.taken["time"][1] == {"command": "uvx", "args": ["mcp-server-time"]}  # the first client wins


def test_collect_skips_self_entries_duplicates_and_invalid_ones_with_reasons(fake_home: Path) -> None:
    report = collect(default_sources(home=fake_home), existing={})
    skipped = {name: why for _client, name, why in report.skipped}
    assert "hanzo-hub itself" in skipped["hub"]
    assert "hanzo-hub itself" in skipped["self-module"]
    assert "already configured" in skipped["time"]
    assert "invalid" in skipped["nothing"]
    assert "not an object" in skipped["not-an-object"]


def test_collect_leaves_servers_the_hub_already_has(fake_home: Path) -> None:
    report = collect(default_sources(home=fake_home), existing={"git": object()})
    assert "git" not in report.taken
    assert any(name == "git" and "already configured" in why for _c, name, why in report.skipped)


def test_project_files_are_read_when_asked(fake_home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    put(project / ".mcp.json", {"mcpServers": {"proj": {"command": "proj-server"}}})
    put(project / ".vscode" / "mcp.json", {"servers": {"proj-vs": {"type": "sse", "url": "http://h/sse"}}})
    report = collect(default_sources(home=fake_home, project=project), existing={})
    assert {"proj", "proj-vs"} <= set(report.taken)


def test_an_unreadable_client_file_is_reported_not_fatal(tmp_path: Path) -> None:
    bad = put(tmp_path / "bad.json", "{oops")
    good = put(tmp_path / "good.json", {"mcpServers": {"a": {"command": "a"}}})
    report = collect([file_source(bad), file_source(good)], existing={})
    assert set(report.taken) == {"a"}
    assert any(name == str(bad) and "unreadable" in why for _c, name, why in report.skipped)


def test_merge_writes_a_config_the_hub_loads_and_keeps_other_keys(fake_home: Path, tmp_path: Path) -> None:
    target = put(
        tmp_path / "hub" / "config.json", {"backends": {"call_timeout": 5}, "mcpServers": {"mine": {"command": "m"}}}
    )
    report = collect(default_sources(home=fake_home), existing={"mine": object()})
    merge_into(target, report)
    settings = load_settings(target)
    assert settings.backends.call_timeout == 5
    assert set(settings.servers) == {"mine", "time", "git", "remote", "vs-http", "vs-settings"}
    assert isinstance(settings.servers["git"], StdioServerSpec)
    assert settings.servers["git"].env == {"GIT_DIR": "/x"}
    assert isinstance(settings.servers["vs-http"], HttpServerSpec)
    assert not list(target.parent.glob("*.tmp"))


def test_merge_refuses_to_overwrite_a_broken_config(tmp_path: Path) -> None:
    target = put(tmp_path / "config.json", "[not, an object")
    report = collect([file_source(put(tmp_path / "src.json", {"mcpServers": {"a": {"command": "a"}}}))], {})
    with pytest.raises(ConfigError):
        merge_into(target, report)
    assert target.read_text(encoding="utf-8") == "[not, an object"


def test_cli_import_from_a_file_writes_the_home_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = put(
        tmp_path / "claude_desktop_config.json",
        {"mcpServers": {"time": {"command": "t"}, "hub": {"command": "hanzo-hub"}}},
    )
    elsewhere = tmp_path / "env-home"
    put(elsewhere / "config.json", {"mcpServers": {"env-only": {"command": "e"}}})
    monkeypatch.setenv("HANZO_HUB_HOME", str(elsewhere))
    home = tmp_path / "flag-home"
    assert main(["import", "--from", str(source), "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "took time" in out
    assert "skipped hub" in out
    written = json.loads((home / "config.json").read_text(encoding="utf-8"))
    assert set(written["mcpServers"]) == {"time"}  # --home wins over $HANZO_HUB_HOME
    assert set(json.loads((elsewhere / "config.json").read_text(encoding="utf-8"))["mcpServers"]) == {"env-only"}


def test_cli_import_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = put(tmp_path / "mcp.json", {"servers": {"api": {"type": "http", "url": "http://x/mcp"}}})
    home = tmp_path / "home"
    assert main(["import", "--from", str(source), "--home", str(home), "--dry-run"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert not (home / "config.json").exists()


def test_cli_import_runs_as_the_installed_command(tmp_path: Path) -> None:
    source = put(tmp_path / "cursor.json", {"mcpServers": {"remote": {"url": "https://example.com/mcp"}}})
    home = tmp_path / "home"
    command = [sys.executable, "-m", "hanzo_hub", "import", "--from", str(source), "--home", str(home)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "remote" in json.loads((home / "config.json").read_text(encoding="utf-8"))["mcpServers"]
