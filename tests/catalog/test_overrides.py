"""``catalog.overrides``: a user's change to a catalog server's launch, which stays a catalog server."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hanzo_hub.catalog.loader import catalog_specs, env_dir
from hanzo_hub.config import HubSettings, SandboxSettings, StdioServerSpec
from hanzo_hub.hub.core import Hub
from tests.conftest import FAST_BACKENDS


def _settings(home: Path, **catalog: object) -> HubSettings:
    return HubSettings(
        home=home, catalog=catalog, backends=FAST_BACKENDS, sandbox=SandboxSettings(keyring_service=None)
    )


def _spec(settings: HubSettings, server: str) -> StdioServerSpec:
    spec = catalog_specs(settings)[server]
    assert isinstance(spec, StdioServerSpec)
    return spec


def test_args_replace_the_manifest_launch_and_env_merges_over_it(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    plain = _spec(_settings(tmp_path / "home", enabled=["redis", "memory"], project=proj), "redis")
    assert plain.args == ("--url", "redis://127.0.0.1:6379/0")
    overrides = {
        "redis": {"args": ["--url", "redis://127.0.0.1:7000/1"], "env": {"REDIS_SSL": "false"}},
        "memory": {"env": {"MEMORY_FILE_PATH": "{project}/mem.jsonl", "EXTRA": "1"}, "extra_args": ["--x", "{{y}}"]},
    }
    settings = _settings(tmp_path / "home", enabled=["redis", "memory"], project=proj, overrides=overrides)
    redis = _spec(settings, "redis")
    assert redis.args == ("--url", "redis://127.0.0.1:7000/1")
    assert redis.env["REDIS_SSL"] == "false"
    assert redis.command == plain.command
    assert redis.error_patterns == plain.error_patterns
    assert redis.error_patterns
    assert redis.tool_overrides == plain.tool_overrides
    assert redis.tool_overrides
    memory = _spec(settings, "memory")
    assert memory.env["MEMORY_FILE_PATH"] == str(proj / "mem.jsonl")  # placeholders filled, override wins
    assert memory.env["EXTRA"] == "1"
    assert memory.args[-2:] == ("--x", "{y}")  # doubled braces are literal
    assert memory.command == "node"


def test_override_for_a_server_not_enabled_changes_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "home", enabled=["git"], overrides={"redis": {"args": []}})
    assert set(catalog_specs(settings)) == {"git"}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"args": ["{workspace}"]}, "unknown placeholder {workspace}"),
        ({"env": {"A": "{project"}}, "bad template"),
        ({"argz": []}, "argz"),
    ],
)
def test_bad_override_is_a_clear_config_error(tmp_path: Path, override: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("{", r"\{")):
        _settings(tmp_path, enabled=["redis"], overrides={"redis": override})


async def test_overridden_server_is_still_sandboxed_and_policed(tmp_path: Path) -> None:
    overrides = {"redis": {"args": ["--url", "redis://127.0.0.1:7000/1"]}}
    settings = _settings(tmp_path / "home", enabled=["redis"], project=tmp_path, overrides=overrides)
    env_dir(settings, "redis").mkdir(parents=True)
    hub = Hub(settings)
    assert "redis" in hub.launches  # launched through the manifest's sandbox
    sandbox = hub.launches["redis"]
    assert sandbox.kind == "bwrap"
    assert sandbox.limits.network == "full"  # manifest network "loopback" shares the host network
    assert env_dir(settings, "redis").resolve() in sandbox.grants.readable
    spec = hub.servers["redis"]
    assert isinstance(spec, StdioServerSpec)
    assert spec.args == ("--url", "redis://127.0.0.1:7000/1")


def test_env_passthrough_passes_only_the_listed_host_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "from-host")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.setenv("CATALOG_TEST_UNLISTED", "secret")
    overrides = {"aws-iam": {"env": {"AWS_ENDPOINT_URL": "http://127.0.0.1:6000"}}}
    spec = _spec(_settings(tmp_path / "home", enabled=["aws-iam"], overrides=overrides), "aws-iam")
    assert spec.env["AWS_PROFILE"] == "from-host"  # listed in the manifest's envPassthrough
    assert spec.env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:6000"  # the user's override wins
    assert "CATALOG_TEST_UNLISTED" not in spec.env
    assert spec.env["AWS_REGION"] == "us-east-1"  # manifest default, not in the host environment
