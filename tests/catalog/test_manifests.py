"""Every packaged manifest is valid; broken ones are skipped with a precise error; specs and snapshots for the hub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
from mcp import Client

from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.catalog.cli import manifest_from_entry, stats
from hanzo_hub.catalog.envs import STAMP, is_installed
from hanzo_hub.catalog.loader import (
    PACKAGED_DIR,
    catalog_snapshots,
    catalog_specs,
    env_dir,
    load_catalog,
    read_state,
    write_state,
)
from hanzo_hub.catalog.models import CATEGORIES, META_KEY, meta_schema, tools_hash
from hanzo_hub.config import ExposureSettings, HubSettings, StdioServerSpec
from hanzo_hub.errors import ManifestInvalid
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import FAST_BACKENDS

SCHEMA_FILE = PACKAGED_DIR.parent / "meta.schema.json"
THIRD_PARTY = {
    "time",
    "git",
    "fetch",
    "filesystem",
    "memory",
    "sqlite",
    "excel",
    "markitdown",
    "redis",
    "motherduck",
    "dbhub",
    "aws-iam",
    "aws-sns-sqs",
    "mlflow",
    "jupyter",
    "git-cyanheads",
    "desktop-commander",
    "code-runner",
    "sequential-thinking",
    "valkey",
    "memcached",
    "playwright",
    "email",
    "chrome-devtools",
    "cli",
    "shell",
    "graphql",
    "openapi",
    "chroma",
    "duckdb",
    "postgres",
    "aws-cloudwatch",
}


def settings_for(home: Path, **catalog: object) -> HubSettings:
    return HubSettings(home=home, catalog=catalog, backends=FAST_BACKENDS)


def test_every_packaged_manifest_loads_with_its_tools(tmp_path: Path) -> None:
    catalog = load_catalog(settings_for(tmp_path))
    assert catalog.errors == []
    assert THIRD_PARTY | {"everything"} <= set(catalog.entries)
    for entry in catalog.entries.values():
        assert entry.meta.category in CATEGORIES
        if entry.meta.origin != "first-party":  # first-party servers ship inside hanzo-hub: no packages
            assert entry.server.packages[0].version == entry.server.version
        if entry.tools is None:  # only a generated tool set (one per OpenAPI operation) ships without a snapshot
            assert entry.meta.dynamic, entry.id
            continue
        assert entry.tools.tools, entry.id
        assert entry.tools.sha256 == tools_hash(entry.tools.tools)
        assert len(set(entry.tools.names)) == len(entry.tools.names)
    assert catalog.entries["everything"].meta.origin == "fixture"


def test_meta_schema_file_is_current_and_validates_every_manifest() -> None:
    shipped = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert shipped == meta_schema(), "regenerate: python -m hanzo_hub.catalog.models > .../meta.schema.json"
    for path in sorted(PACKAGED_DIR.glob("*/server.json")):
        jsonschema.validate(json.loads(path.read_text(encoding="utf-8"))["_meta"][META_KEY], shipped)


def _copy_packaged(dest: Path, *ids: str) -> Path:
    for server_id in ids:
        shutil.copytree(PACKAGED_DIR / server_id, dest / server_id)
    return dest


def test_broken_manifest_is_skipped_with_file_and_key(tmp_path: Path) -> None:
    extra = _copy_packaged(tmp_path / "extra", "time")
    shutil.copytree(extra / "time", extra / "broken")
    path = extra / "broken" / "server.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["_meta"][META_KEY]["id"] = "broken"
    data["_meta"][META_KEY]["category"] = "telepathy"
    path.write_text(json.dumps(data), encoding="utf-8")
    (extra / "junk").mkdir()
    (extra / "junk" / "server.json").write_text("{not json", encoding="utf-8")
    catalog = load_catalog(settings_for(tmp_path / "home", packaged=False, manifest_dirs=[extra]))
    assert set(catalog.entries) == {"time"}
    by_path = {Path(e.path).parent.name: e for e in catalog.errors}
    assert set(by_path) == {"broken", "junk"}
    assert all(isinstance(e, ManifestInvalid) for e in catalog.errors)
    assert by_path["broken"].key == f"_meta.{META_KEY}.category"
    assert by_path["broken"].path == str(path)
    assert by_path["junk"].key.startswith("line 1")


def test_tampered_tools_json_and_unknown_placeholder_are_precise(tmp_path: Path) -> None:
    extra = _copy_packaged(tmp_path / "extra", "time", "git")
    tools = extra / "time" / "tools.json"
    data = json.loads(tools.read_text(encoding="utf-8"))
    data["tools"][0]["description"] = "edited by hand"
    tools.write_text(json.dumps(data), encoding="utf-8")
    server = extra / "git" / "server.json"
    manifest = json.loads(server.read_text(encoding="utf-8"))
    manifest["_meta"][META_KEY]["launch"]["args"] = ["--repository", "{workspace}"]
    server.write_text(json.dumps(manifest), encoding="utf-8")
    catalog = load_catalog(settings_for(tmp_path / "home", packaged=False, manifest_dirs=[extra]))
    assert catalog.entries == {}
    keys = sorted((Path(e.path).name, e.key) for e in catalog.errors)
    assert keys == [("server.json", f"_meta.{META_KEY}.launch"), ("tools.json", "(top level)")]


def test_specs_fill_placeholders_for_enabled_servers_only(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "home", enabled=["git", "memory"], project=tmp_path / "proj")
    specs = catalog_specs(settings)
    assert set(specs) == {"git", "memory"}
    git = specs["git"]
    assert isinstance(git, StdioServerSpec)
    assert git.command == str(env_dir(settings, "git") / "bin" / "mcp-server-git")
    assert git.args == ("--repository", str(tmp_path / "proj"))
    memory = specs["memory"]
    assert isinstance(memory, StdioServerSpec)
    assert memory.env["MEMORY_FILE_PATH"] == str(tmp_path / "home" / "data" / "memory" / "memory.jsonl")


def test_enable_and_disable_state_overrides_settings(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, enabled=["git"])
    state = read_state(settings)
    state.enabled.append("time")
    state.disabled.append("git")
    write_state(settings, state)
    assert set(catalog_specs(settings)) == {"time"}


async def test_seeded_snapshots_answer_tools_list_before_any_install(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "home", enabled=sorted(THIRD_PARTY))
    every_tool = ExposureSettings(mode="all")  # 'auto' lists find_tools for the whole third-party catalog
    servers = catalog_specs(settings)
    hub_settings = HubSettings(home=settings.home, servers=servers, backends=FAST_BACKENDS, exposure=every_tool)
    store = SnapshotStore(hub_settings.snapshot_dir)
    for name, data in catalog_snapshots(settings).items():
        store.save(name, Listing.from_json(data))
    per_server = stats(settings, load_catalog(settings))["servers"]
    expected = sum(row["tools"] for server, row in per_server.items() if server in THIRD_PARTY)
    async with Hub.open(hub_settings) as hub, Client(build_server(hub)) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) == expected
    assert "git__git_status" in {t.name for t in tools}
    assert not env_dir(settings, "git").exists()  # nothing was installed or started


def test_half_built_env_is_not_installed(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    entry = load_catalog(settings).entries["time"]
    env = env_dir(settings, "time")
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "mcp-server-time").write_text("#!/bin/sh\n", encoding="utf-8")
    assert not is_installed(settings, entry)  # files, but no stamp: a failed or interrupted install
    (env / STAMP).write_text("stale\n", encoding="utf-8")
    assert not is_installed(settings, entry)


def test_claude_entry_becomes_a_loadable_manifest(tmp_path: Path) -> None:
    entry = {"command": "uvx", "args": ["mcp-server-time==2026.10.19", "--local-timezone", "UTC"], "env": {"K": "v"}}
    manifest = manifest_from_entry("My Time", entry, "system", None)
    target = tmp_path / "home" / "catalog" / "manifests" / "my-time" / "server.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(manifest), encoding="utf-8")
    catalog = load_catalog(settings_for(tmp_path / "home", enabled=["my-time"]))
    assert catalog.errors == []
    package = catalog.entries["my-time"].server.packages[0]
    assert (package.registry_type, package.identifier, package.version) == ("pypi", "mcp-server-time", "2026.10.19")
    spec = catalog_specs(settings_for(tmp_path / "home", enabled=["my-time"]))["my-time"]
    assert isinstance(spec, StdioServerSpec)
    assert (spec.command, spec.args, spec.env) == ("uvx", tuple(entry["args"]), {"K": "v"})
