"""``hanzo-hub secrets`` (a real subprocess: the value comes from stdin) and ``hanzo-hub policy show|check``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hanzo_hub.cli import main
from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from tests.conftest import REPO, MakeSettings

SECRET = "sk-cli-9f8e7d6c5b4a"
POLICED = {"target": "tests.fixtures.policed:build"}


def hub_cli(settings: HubSettings, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert settings.config_file is not None
    command = [sys.executable, "-m", "hanzo_hub", *argv, "--config", str(settings.config_file)]
    command += ["--home", str(settings.home)]
    return subprocess.run(command, cwd=REPO, input=stdin, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def settings(make_settings: MakeSettings, tmp_path: Path) -> HubSettings:
    proj = tmp_path / "proj"
    proj.mkdir()
    sandbox = {
        "keyring_service": None,
        "roots": {"*": [str(proj)]},
        "servers": {
            "policed": {"category": "web"},
            "boxed": {"sandbox": "bwrap", "write": [str(proj)], "limits": {"pids": 32}},
        },
    }
    boxed = {"command": sys.executable, "args": ["-m", "tests.fixtures.escape"], "cwd": str(REPO)}
    return make_settings({"policed": POLICED, "plain": POLICED, "boxed": boxed}, sandbox=sandbox)


def snapshot(settings: HubSettings) -> None:
    """List the in-process servers once so their tools (and schemas) are in the snapshots."""

    async def run() -> None:
        async with Hub.open(settings) as hub:
            await hub.list_tools()

    anyio.run(run)


def cli_json(capsys: pytest.CaptureFixture[str], settings: HubSettings, *argv: str) -> tuple[int, dict[str, Any]]:
    assert settings.config_file is not None
    code = main([*argv, "--json", "--config", str(settings.config_file), "--home", str(settings.home)])
    return code, json.loads(capsys.readouterr().out)


def test_secrets_set_list_rm_never_show_the_value(settings: HubSettings) -> None:
    stored = hub_cli(settings, "secrets", "set", "API_TOKEN", stdin=SECRET + "\n")
    assert stored.returncode == 0, stored.stderr
    assert SECRET not in stored.stdout + stored.stderr
    listed = hub_cli(settings, "secrets", "list")
    assert listed.stdout.split() == ["API_TOKEN"]
    assert SECRET not in listed.stdout
    on_disk = (settings.vault_dir / "secrets.json").read_text(encoding="utf-8")
    assert "API_TOKEN" in on_disk
    assert SECRET not in on_disk  # encrypted at rest
    assert (settings.vault_dir / "vault.key").stat().st_mode & 0o077 == 0
    removed = hub_cli(settings, "secrets", "rm", "API_TOKEN")
    assert removed.returncode == 0
    again = hub_cli(settings, "secrets", "rm", "API_TOKEN")
    assert again.returncode == 1
    assert "no secret named API_TOKEN" in again.stderr
    assert hub_cli(settings, "secrets", "list").stdout.strip() == "no secrets stored"


def test_secrets_set_refuses_a_value_on_the_command_line_and_an_empty_one(settings: HubSettings) -> None:
    on_argv = hub_cli(settings, "secrets", "set", "API_TOKEN", SECRET, stdin="")
    assert on_argv.returncode == 2  # argparse: no such argument
    assert not (settings.vault_dir / "secrets.json").exists()
    empty = hub_cli(settings, "secrets", "set", "API_TOKEN", stdin="")
    assert empty.returncode == 2
    assert "empty" in empty.stderr
    bad_name = hub_cli(settings, "secrets", "set", "no spaces allowed", stdin="x")
    assert bad_name.returncode == 2
    assert "secret name" in bad_name.stderr


def test_policy_check_dry_runs_a_call(settings: HubSettings, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot(settings)
    code, out = cli_json(capsys, settings, "policy", "check", "policed__read_file", "--args", '{"path": "../x"}')
    assert code == 1
    assert out["allowed"] is False
    assert out["limit"] == "path"
    assert out["path_arguments"] == ["path"]
    assert out["note"] is None  # from the snapshot's schema
    code, out = cli_json(capsys, settings, "policy", "check", "policed__read_file", "--args", '{"path": "a.txt"}')
    assert code == 0
    assert out["allowed"] is True
    assert out["timeout"] == 30.0  # category web
    code, out = cli_json(
        capsys, settings, "policy", "check", "policed__fetch", "--args", '{"url": "http://localhost:1/"}'
    )
    assert code == 1
    assert "loopback" in out["reason"]
    code, out = cli_json(capsys, settings, "policy", "check", "plain__read_file", "--args", '{"path": "/etc/passwd"}')
    assert code == 0  # no policy for 'plain': bounded defaults, no path checks
    assert out["path_arguments"] == []


def test_policy_check_bad_input_is_a_clear_error(settings: HubSettings, capsys: pytest.CaptureFixture[str]) -> None:
    assert settings.config_file is not None
    common = ["--config", str(settings.config_file), "--home", str(settings.home)]
    assert main(["policy", "check", "policed__echo", "--args", "{not json", *common]) == 2
    assert "--args is not JSON" in capsys.readouterr().err
    assert main(["policy", "check", "policed__echo", "--args", "[1]", *common]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
    assert main(["policy", "check", "nobody__echo", *common]) == 2
    assert "unknown tool 'nobody__echo'" in capsys.readouterr().err


def test_policy_check_without_a_snapshot_uses_argument_names(
    settings: HubSettings, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = cli_json(capsys, settings, "policy", "check", "boxed__write", "--args", '{"path": "/etc/x"}')
    assert code == 1
    assert out["limit"] == "path"
    assert "names only" in out["note"]
    code, out = cli_json(capsys, settings, "policy", "check", "boxed__write", "--args", '{"path": "ok.txt"}')
    assert code == 0


def test_policy_show_server_and_tool(settings: HubSettings, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot(settings)
    code, boxed = cli_json(capsys, settings, "policy", "show", "boxed")
    assert code == 0
    assert boxed["sandbox"]["backend"] == "bwrap"
    assert boxed["sandbox"]["limits"]["pids"] == 32
    assert any(path.endswith("/proj") for path in boxed["sandbox"]["writable"])
    code, policed = cli_json(capsys, settings, "policy", "show", "policed")
    assert policed["category"] == "web"
    assert policed["sandbox"] is None  # in-process: nothing to launch
    fetch = next(t for t in policed["tools"] if t["tool"] == "fetch")
    assert fetch["policy"]["rate_per_minute"] == 10
    assert fetch["url_arguments"] == ["url"]
    code, tool = cli_json(capsys, settings, "policy", "show", "policed__read_file")
    assert code == 0
    assert tool["path_arguments"] == ["path"]
    assert tool["policy"]["timeout"] == 30.0
