"""Each cataloged server installed into its own env, started through the hub, checked against its tools.json, and
called once against a real local thing. Envs persist in ``.cache/catalog-home`` (stamped, so reruns are quick).

Needs the package registries the first time (``scripts/test`` / ``.ci/run`` run these as ``integration``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hanzo_hub.catalog.envs import install, is_installed
from hanzo_hub.catalog.loader import CatalogEntry, load_catalog
from hanzo_hub.catalog.models import META_KEY
from hanzo_hub.config import HubSettings
from hanzo_hub.errors import InstallFailed
from tests.catalog.live.helpers import Call, run_live
from tests.conftest import REPO, static_page

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

HOME = REPO / ".cache" / "catalog-home"
PAGE = b"<html><head><title>Catalog page</title></head><body><h1>Hello catalog</h1></body></html>"


@pytest.fixture(scope="module")
def web_page() -> Iterator[str]:
    with static_page(PAGE, "/page.html") as url:
        yield url


def project(tmp: Path) -> Path:
    proj = tmp / "proj"
    proj.mkdir()
    (proj / "notes.txt").write_text("catalog notes\n", encoding="utf-8")
    (proj / "page.html").write_bytes(PAGE)
    for cmd in (
        ["init", "-q"],
        ["add", "notes.txt"],
        ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", *cmd], cwd=proj, check=True)
    return proj


def calls(server: str, proj: Path, url: str) -> list[tuple[str, dict[str, Any], str]]:
    """(tool, arguments, text expected in the result) per server."""
    table: dict[str, list[tuple[str, dict[str, Any], str]]] = {
        "time": [("get_current_time", {"timezone": "UTC"}, "UTC")],
        "git": [("git_status", {"repo_path": str(proj)}, "page.html")],
        "fetch": [("fetch", {"url": url}, "Hello catalog")],
        "filesystem": [("list_directory", {"path": str(proj)}, "notes.txt")],
        "memory": [
            (
                "create_entities",
                {"entities": [{"name": "hub", "entityType": "project", "observations": ["MCP"]}]},
                "hub",
            ),
            ("read_graph", {}, "MCP"),
        ],
        "sqlite": [("read_query", {"query": "select 40 + 2 as answer"}, "42")],
        "excel": [
            ("create_workbook", {"path": str(proj / "book.xlsx")}, "book.xlsx"),
            ("describe_workbook", {"path": str(proj / "book.xlsx")}, "Sheet1"),
        ],
        "markitdown": [("convert_to_markdown", {"uri": (proj / "page.html").as_uri()}, "Hello catalog")],
    }
    return table[server]


LIVE = ["time", "git", "fetch", "filesystem", "memory", "sqlite", "excel", "markitdown"]


@pytest.mark.parametrize("server", LIVE)
async def test_installed_server_through_hub_matches_snapshot_and_answers(
    server: str, tmp_path: Path, web_page: str
) -> None:
    """Enabled from the catalog as a user does: sandboxed, under its per-call policy, ``proj`` as the project."""
    proj = project(tmp_path)
    extra: tuple[str, ...] = ()
    policy: dict[str, Any] | None = None
    if server == "fetch":  # its default refuses loopback addresses (and so does the hub's policy): the page is local
        extra, policy = ("--allow-private-ips", "--ignore-robots-txt"), {"defaults": {"allow_private_network": True}}
    wanted = [Call(name, args, want) for name, args, want in calls(server, proj, web_page)]
    await run_live(server, tmp_path, wanted, project=proj, extra_args=extra, policy=policy)


def _broken_copy(tmp: Path, entry: CatalogEntry, **install_meta: Any) -> CatalogEntry:
    data = json.loads((entry.directory / "server.json").read_text(encoding="utf-8"))
    data["_meta"][META_KEY]["install"].update(install_meta)
    target = tmp / "manifests" / entry.id
    target.mkdir(parents=True)
    (target / "server.json").write_text(json.dumps(data), encoding="utf-8")
    settings = HubSettings(home=tmp / "home", catalog={"packaged": False, "manifest_dirs": [tmp / "manifests"]})
    return load_catalog(settings).entries[entry.id]


async def test_unresolvable_pin_fails_clearly_and_others_still_install(tmp_path: Path) -> None:
    settings = HubSettings(home=tmp_path / "home")
    good = load_catalog(settings).entries["time"]
    bad = _broken_copy(tmp_path / "bad", good, pins=["mcp<0.1"])
    bad_settings = HubSettings(home=tmp_path / "home", catalog={"packaged": False})
    with pytest.raises(InstallFailed) as caught:
        await install(bad_settings, bad)
    assert caught.value.server == "time"
    assert not is_installed(bad_settings, bad)
    await install(settings, load_catalog(settings).entries["git"])
    assert is_installed(settings, load_catalog(settings).entries["git"])


async def test_install_failing_half_way_is_repaired_on_retry(tmp_path: Path) -> None:
    marker = tmp_path / "second-try"
    flaky = [
        "python3",
        "-c",
        f"import pathlib, sys; p = pathlib.Path({str(marker)!r}); ok = p.exists(); p.touch(); sys.exit(0 if ok else 3)",
    ]
    entry = _broken_copy(tmp_path, load_catalog(HubSettings(home=tmp_path)).entries["time"], postInstall=[flaky])
    settings = HubSettings(
        home=tmp_path / "home", catalog={"packaged": False, "manifest_dirs": [tmp_path / "manifests"]}
    )
    with pytest.raises(InstallFailed):
        await install(settings, entry)
    assert (settings.envs_dir / "time" / "bin" / "mcp-server-time").exists()  # half-built: the package is there
    assert not is_installed(settings, entry)
    assert await install(settings, entry) is True
    assert is_installed(settings, entry)
    assert await install(settings, entry) is False  # idempotent
