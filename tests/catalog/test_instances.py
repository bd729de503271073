"""``catalog.instances``: more servers launched from one catalog entry (two databases, two APIs), each a catalog
server under its own name, with its own launch changes and vault references."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp import Client
from pydantic import ValidationError

from hanzo_hub.catalog.loader import catalog_specs
from hanzo_hub.config import HubSettings, SandboxSettings, StdioServerSpec
from hanzo_hub.doctor import diagnose
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from hanzo_hub.sandbox.vault import Vault
from tests.conftest import FAST_BACKENDS, text_of
from tests.hub.test_sandboxed_launch import fixture_manifest

SECRET = "sk-instance-7a6b5c4d3e2f"


def _settings(home: Path, **catalog: object) -> HubSettings:
    return HubSettings(
        home=home, catalog=catalog, backends=FAST_BACKENDS, sandbox=SandboxSettings(keyring_service=None)
    )


def _spec(specs: dict[str, object], name: str) -> StdioServerSpec:
    spec = specs[name]
    assert isinstance(spec, StdioServerSpec)
    return spec


def test_instances_are_catalog_servers_under_their_own_names(tmp_path: Path) -> None:
    instances = {
        "orders-db": {"entry": "dbhub", "env": {"DSN": "postgres://app:${vault:ORDERS_PW}@127.0.0.1/orders"}},
        "cache": {"entry": "redis", "args": ["--url", "redis://127.0.0.1:6380/0"]},
    }
    overrides = {"redis": {"args": ["--url", "redis://127.0.0.1:6379/2"]}}
    settings = _settings(tmp_path / "home", enabled=["redis"], instances=instances, overrides=overrides)
    specs = catalog_specs(settings)
    assert set(specs) == {"redis", "orders-db", "cache"}
    redis, cache, orders = _spec(specs, "redis"), _spec(specs, "cache"), _spec(specs, "orders-db")
    assert redis.args == ("--url", "redis://127.0.0.1:6379/2")  # the entry keeps its own override
    assert cache.args == ("--url", "redis://127.0.0.1:6380/0")  # the instance has its own
    assert cache.command == redis.command  # the same environment
    assert cache.error_patterns == redis.error_patterns
    assert cache.tool_overrides == redis.tool_overrides
    assert orders.env["DSN"] == "postgres://app:${vault:ORDERS_PW}@127.0.0.1/orders"  # left for the launch to fill


def test_an_instance_of_an_unknown_entry_is_left_out_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(tmp_path / "home", instances={"ghost": {"entry": "no-such-server"}})
    with caplog.at_level(logging.WARNING):
        assert catalog_specs(settings) == {}
    assert "catalog instance ghost: no catalog entry 'no-such-server'" in caplog.text


@pytest.mark.parametrize(
    ("instances", "message"),
    [
        ({"two words": {"entry": "redis"}}, "must be 1-128 characters without whitespace"),
        ({"cache": {"args": []}}, "entry"),
        ({"cache": {"entry": "redis", "env": {"A": "{workspace}"}}}, "unknown placeholder {workspace}"),
    ],
)
def test_a_bad_instance_is_a_clear_config_error(tmp_path: Path, instances: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("{", r"\{")):
        _settings(tmp_path, instances=instances)


async def test_two_instances_run_sandboxed_each_with_its_own_settings_and_secret(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    home = tmp_path / "home"
    Vault(home / "vault", keyring_service=None).set("ALPHA_TOKEN", SECRET)
    instances = {
        "alpha-box": {"entry": "escapee", "env": {"WHO": "alpha", "TOKEN": "${vault:ALPHA_TOKEN}"}},
        "beta-box": {"entry": "escapee", "env": {"WHO": "beta"}},
        "ghost": {"entry": "no-such-server"},
    }
    settings = _settings(
        home, manifest_dirs=[str(fixture_manifest(tmp_path))], project=str(proj), instances=instances
    ).model_copy(update={"memory": HubSettings().memory.model_copy(update={"enabled": False})})
    assert settings.vault_dir == home / "vault"
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        assert {hub.launches["alpha-box"].kind, hub.launches["beta-box"].kind} == {"bwrap"}
        who = [text_of(await client.call_tool(f"{n}__getenv", {"name": "WHO"})) for n in ("alpha-box", "beta-box")]
        token = text_of(await client.call_tool("alpha-box__getenv", {"name": "TOKEN"}))
        unset = text_of(await client.call_tool("beta-box__getenv", {"name": "TOKEN"}))
        outside = await client.call_tool("beta-box__write", {"path": str(tmp_path / "x.txt"), "text": "x"})
        checks = [c for c in await diagnose(settings) if c.name == "catalog"]
    assert who == ["alpha", "beta"]
    assert token == "[redacted:ALPHA_TOKEN]"  # the secret reached the server, and not the client
    assert unset == "<unset>"
    assert outside.is_error  # each instance is policed by the entry's manifest
    assert "policy denied beta-box/write (path)" in text_of(outside)
    assert any(c.status == "fail" and "instance 'ghost': no catalog entry 'no-such-server'" in c.detail for c in checks)
