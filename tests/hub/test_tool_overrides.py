"""Tool overrides (a server's ``tool_overrides``, filled from a catalog manifest's ``toolOverrides``): hidden tools are
neither listed nor callable, renamed ones are listed and called under the new name, description fixes show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from hanzo_hub.catalog.loader import catalog_specs, load_catalog
from hanzo_hub.catalog.models import META_KEY
from hanzo_hub.config import HubSettings
from hanzo_hub.errors import ConfigError
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.registry import ORIGINAL_NAME
from hanzo_hub.hub.server import build_server
from tests.conftest import MakeSettings, inproc, text_of

OVERRIDES: dict[str, dict[str, Any]] = {
    "echo": {"rename": "say"},
    "add": {"description": "Add two integers a and b; returns their sum."},
    "fail": {"hidden": True},
}


@pytest.mark.anyio
async def test_overrides_hide_rename_and_redescribe(make_settings: MakeSettings) -> None:
    settings = make_settings({"alpha": inproc("alpha", tool_overrides=OVERRIDES), "beta": inproc("beta")})
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        said = await client.call_tool("alpha__say", {"text": "renamed"})
        summed = await client.call_tool("alpha__add", {"a": 40, "b": 2})
        with pytest.raises(MCPError, match="alpha__fail"):
            await client.call_tool("alpha__fail", {})
        with pytest.raises(MCPError, match="alpha__echo"):
            await client.call_tool("alpha__echo", {"text": "old name"})
    assert "alpha__fail" not in tools
    assert "beta__fail" in tools
    assert "alpha__echo" not in tools
    assert "alpha__say" in tools
    assert "beta__echo" in tools
    assert (tools["alpha__say"].meta or {}).get(ORIGINAL_NAME) == "echo"
    assert tools["alpha__add"].description == OVERRIDES["add"]["description"]
    assert tools["beta__add"].description == "Add two integers."
    assert not said.is_error
    assert text_of(said) == "renamed"
    assert text_of(summed) == "42"


def test_catalog_manifest_overrides_reach_the_hub_spec(tmp_path: Path) -> None:
    settings = HubSettings(home=tmp_path / "home", catalog={"enabled": ["redis", "aws-iam"]})
    specs = catalog_specs(settings)
    assert specs["redis"].tool_overrides["json_set"].hidden
    assert specs["aws-iam"].tool_overrides["list_users"].hidden
    entry = load_catalog(settings).entries["redis"]
    data = json.loads((entry.directory / "server.json").read_text(encoding="utf-8"))
    hidden = {n for n, o in data["_meta"][META_KEY]["toolOverrides"].items() if o.get("hidden")}
    assert hidden == {n for n, o in specs["redis"].tool_overrides.items() if o.hidden}


@pytest.mark.anyio
async def test_hidden_catalog_tools_are_not_listed_from_the_snapshot(tmp_path: Path) -> None:
    settings = HubSettings(home=tmp_path / "home", catalog={"enabled": ["redis"]})
    async with Hub.open(settings) as hub:  # nothing installed: the packaged tools.json seeds the listing
        names = {t.name for t in hub.snapshot_tools()}
    assert "set" in names
    assert "get" in names
    assert not names & {"json_set", "json_get", "hybrid_search", "search_redis_documents"}
    assert len(names) == 43


@pytest.mark.anyio
async def test_error_patterns_mark_plain_text_failures_as_errors(make_settings: MakeSettings) -> None:
    settings = make_settings(
        {"alpha": inproc("alpha", error_patterns=["Error ", "Failed to "]), "beta": inproc("beta")}
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        failed = await client.call_tool("alpha__echo", {"text": "Error setting key 'k': connection refused"})
        fine = await client.call_tool("alpha__echo", {"text": "no Error here"})
        other = await client.call_tool("beta__echo", {"text": "Error but beta has no patterns"})
    assert failed.is_error
    assert text_of(failed) == "Error setting key 'k': connection refused"  # the text is kept
    assert not fine.is_error  # matched from the start only
    assert not other.is_error


def test_a_bad_error_pattern_is_a_clear_config_error(make_settings: MakeSettings) -> None:
    with pytest.raises(ConfigError, match="not a regular expression"):
        make_settings({"alpha": inproc("alpha", error_patterns=["(unclosed"])})


@pytest.mark.anyio
async def test_allow_and_deny_patterns_limit_what_a_server_exposes(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(
        {
            "alpha": inproc("alpha", tools={"allow": ["e*", "a??", "sleep*"], "deny": ["sleep_*"]}),
            "beta": inproc("beta", tools={"deny": ["*"]}),
            "gamma": inproc("gamma", tools={"allow": ["no_such_tool*"]}),
        }
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        echoed = await client.call_tool("alpha__echo", {"text": "kept"})
        with pytest.raises(MCPError, match="alpha__fail"):
            await client.call_tool("alpha__fail", {"reason": "filtered out"})  # listed nowhere, callable nowhere
    alpha = {n.removeprefix("alpha__") for n in names if n.startswith("alpha__")}
    assert alpha == {"echo", "embedded", "add", "sleep"}  # "sleep_marked" matches allow and deny: deny wins
    assert not [n for n in names if n.startswith(("beta__", "gamma__"))]
    assert text_of(echoed) == "kept"
    assert "server gamma: no tool matches its allow patterns ['no_such_tool*']" in caplog.text


def test_tool_patterns_are_validated_and_reach_catalog_servers(make_settings: MakeSettings, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="a tool pattern must not be empty"):
        make_settings({"alpha": inproc("alpha", tools={"allow": [" "]})})
    settings = HubSettings(
        home=tmp_path / "home",
        catalog={"enabled": ["redis"], "overrides": {"redis": {"tools": {"allow": ["get", "set"]}}}},
    )
    spec = catalog_specs(settings)["redis"]
    assert spec.tools is not None
    assert spec.tools.admits("get")
    assert not spec.tools.admits("hset")
