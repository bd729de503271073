"""Settings: the client config shapes users already have, clear errors, and flags > env > file > defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hanzo_hub.cli import main
from hanzo_hub.config import (
    HttpServerSpec,
    InprocServerSpec,
    SseServerSpec,
    StdioServerSpec,
    default_config_file,
    load_settings,
)
from hanzo_hub.errors import ConfigError


@pytest.fixture
def write(tmp_path: Path) -> Any:
    def write(body: Any, name: str = "config.json") -> Path:
        path = tmp_path / name
        path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
        return path

    return write


def test_claude_style_mcp_servers_become_stdio_and_http_specs(write: Any, tmp_path: Path) -> None:
    path = write(
        {
            "mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
                "remote": {"url": "https://example.com/mcp"},
                "local": {"target": "tests.fixtures.downstream:alpha"},
            }
        }
    )
    settings = load_settings(path)
    time, remote, local = settings.servers["time"], settings.servers["remote"], settings.servers["local"]
    assert isinstance(time, StdioServerSpec)
    assert (time.command, time.args, time.env) == ("uvx", ("mcp-server-time",), {"TZ": "UTC"})
    assert isinstance(remote, HttpServerSpec)
    assert remote.url == "https://example.com/mcp"
    assert isinstance(local, InprocServerSpec)
    assert settings.config_file == path


def test_vs_code_servers_use_their_type_and_inputs_are_ignored(write: Any) -> None:
    path = write(
        {
            "inputs": [{"type": "promptString", "id": "token", "password": True}],
            "servers": {
                "fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-filesystem"], "cwd": "/tmp"},
                "api": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}},
                "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
                "camel": {"type": "streamableHttp", "url": "http://127.0.0.1:9/mcp"},
            },
        }
    )
    servers = load_settings(path).servers
    assert isinstance(servers["fs"], StdioServerSpec)
    assert servers["fs"].cwd == Path("/tmp")
    assert isinstance(servers["api"], HttpServerSpec)
    assert servers["api"].headers["Authorization"].get_secret_value() == "Bearer x"
    assert "Bearer x" not in repr(servers["api"])
    assert isinstance(servers["old"], SseServerSpec)
    assert isinstance(servers["camel"], HttpServerSpec)


def test_both_blocks_merge(write: Any) -> None:
    path = write({"mcpServers": {"a": {"command": "a"}}, "servers": {"b": {"type": "http", "url": "http://b"}}})
    assert set(load_settings(path).servers) == {"a", "b"}


def test_toml_config_is_read_by_extension(write: Any) -> None:
    path = write('[backends]\ncall_timeout = 3.5\n\n[mcpServers.time]\ncommand = "t"\n', name="hub.toml")
    settings = load_settings(path)
    assert settings.backends.call_timeout == 3.5
    assert isinstance(settings.servers["time"], StdioServerSpec)


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ({"mcpServers": {"broken": {"args": ["x"]}}}, ["broken", "command"]),
        ({"mcpServers": {"odd": {"type": "carrier-pigeon", "command": "x"}}}, ["odd", "carrier-pigeon"]),
        ({"servers": {"web": {"type": "sse", "url": "ftp://example.com"}}}, ["servers.web.url", "pattern"]),
        ({"mcpServers": {"empty": {"command": ""}}}, ["servers.empty.command"]),
        ({"mcpServers": {"a": {"command": "a", "alias": "no spaces!"}}}, ["servers.a.alias"]),
        ({"mcpServers": {"with space": {"command": "a"}}}, ["with space", "whitespace"]),
        ({"mcpServers": {"a": {"command": "a", "alias": "s"}, "b": {"command": "b", "alias": "s"}}}, ["alias 's'"]),
        ({"mcpServers": {"a": {"command": "a", "colour": "red"}}}, ["servers.a.colour"]),
        ({"nonsense": True}, ["nonsense"]),
        ({"backends": {"call_timeout": -1}}, ["backends.call_timeout"]),
        ({"backends": {"max_message_bytes": -1}}, ["backends.max_message_bytes"]),
        (  # a Client ID Metadata Document must be served over HTTPS, at a path
            {
                "servers": {
                    "web": {
                        "type": "http",
                        "url": "https://x.example/mcp",
                        "oauth": {"client_metadata_url": "http://me.example/client.json"},
                    }
                }
            },
            ["servers.web.oauth.client_metadata_url", "pattern"],
        ),
        ({"mcpServers": ["not", "a", "map"]}, ["mcpServers", "object"]),
        ({"mcpServers": {"x": {"command": "a"}}, "servers": {"x": {"command": "b"}}}, ["'x'", "both"]),
        ([1, 2], ["top level"]),
        ("{not json", ["JSON"]),
    ],
)
def test_invalid_config_raises_config_error_naming_file_key_and_problem(
    write: Any, body: Any, fragments: list[str]
) -> None:
    path = write(body)
    with pytest.raises(ConfigError) as error:
        load_settings(path)
    message = str(error.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(tmp_path / "missing.json")
    assert "missing.json" in str(error.value)


def test_environment_overrides_the_file_section_by_section(write: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write({"backends": {"call_timeout": 3, "connect_timeout": 4}, "home": "/from/file"})
    monkeypatch.setenv("HANZO_HUB_BACKENDS__CALL_TIMEOUT", "7")
    monkeypatch.setenv("HANZO_HUB_HOME", "/from/env")
    settings = load_settings(path)
    assert settings.backends.call_timeout == 7
    assert settings.backends.connect_timeout == 4
    assert settings.home == Path("/from/env")


def test_flags_override_the_environment(write: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write({"backends": {"call_timeout": 3}})
    monkeypatch.setenv("HANZO_HUB_BACKENDS__CALL_TIMEOUT", "7")
    monkeypatch.setenv("HANZO_HUB_HOME", "/from/env")
    settings = load_settings(path, home=Path("/from/flag"), backends={"call_timeout": 9})
    assert settings.backends.call_timeout == 9
    assert settings.home == Path("/from/flag")


def test_an_invalid_environment_value_is_a_config_error(write: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANZO_HUB_BACKENDS__CALL_TIMEOUT", "soon")
    with pytest.raises(ConfigError) as error:
        load_settings(write({}))
    assert "backends.call_timeout" in str(error.value)


def test_default_config_file_comes_from_env_or_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "h"
    home.mkdir()
    monkeypatch.setenv("HANZO_HUB_HOME", str(home))
    assert default_config_file() is None
    (home / "config.json").write_text('{"mcpServers": {"a": {"command": "a"}}}', encoding="utf-8")
    assert default_config_file() == home / "config.json"
    assert set(load_settings().servers) == {"a"}
    monkeypatch.setenv("HANZO_HUB_CONFIG", str(tmp_path / "explicit.json"))
    assert default_config_file() == tmp_path / "explicit.json"


def test_settings_are_frozen(write: Any) -> None:
    settings = load_settings(write({}))
    with pytest.raises(ValueError, match="frozen"):
        settings.log_level = "DEBUG"  # type: ignore[misc]


def test_cli_reports_a_config_error_with_exit_status_2(write: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = write({"mcpServers": {"broken": {}}})
    assert main(["snippet", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err
    assert "broken" in err


def test_cli_snippet_names_the_config_file(write: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = write({})
    assert main(["snippet", "--config", str(path)]) == 0
    entry = json.loads(capsys.readouterr().out)["mcpServers"]["hanzo-hub"]
    assert entry["args"][:2] == ["-m", "hanzo_hub"]
    assert str(path.resolve()) in entry["args"]


def test_the_home_flag_also_locates_the_default_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_home, flag_home = tmp_path / "env", tmp_path / "flag"
    for home, server in ((env_home, "from-env"), (flag_home, "from-flag")):
        home.mkdir()
        (home / "config.json").write_text(json.dumps({"mcpServers": {server: {"command": "x"}}}), encoding="utf-8")
    monkeypatch.setenv("HANZO_HUB_HOME", str(env_home))
    assert set(load_settings().servers) == {"from-env"}
    settings = load_settings(home=flag_home)
    assert set(settings.servers) == {"from-flag"}
    assert settings.config_file == flag_home / "config.json"


def test_embedding_runtime_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pydantic import ValidationError

    from hanzo_hub.config import EmbeddingSettings, HubSettings

    assert HubSettings(home=tmp_path).embedding.runtime == "auto"
    assert HubSettings(home=tmp_path).embedding.cache_dir(tmp_path) == tmp_path / "models"
    assert EmbeddingSettings(cache_path=tmp_path / "x").cache_dir(None) == tmp_path / "x"
    assert EmbeddingSettings().cache_dir(None) is None
    monkeypatch.setenv("HANZO_HUB_EMBEDDING__RUNTIME", "torch")
    monkeypatch.setenv("HANZO_HUB_EMBEDDING__ONNX_THREADS", "2")
    settings = HubSettings(home=tmp_path)
    assert (settings.embedding.runtime, settings.embedding.onnx_threads) == ("torch", 2)
    with pytest.raises(ValidationError):
        EmbeddingSettings(runtime="tensorflow")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        EmbeddingSettings(onnx_threads=0)
