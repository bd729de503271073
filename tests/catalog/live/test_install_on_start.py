"""Install on first use: a catalog server whose environment is missing is built when the hub first starts it; a
failed build fails that server's calls with the reason, the hub keeps serving the others, and a later start retries.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from mcp import Client

from hanzo_hub.catalog.envs import is_installed
from hanzo_hub.catalog.loader import PACKAGED_DIR, load_catalog
from hanzo_hub.catalog.models import META_KEY
from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import FAST_BACKENDS, inproc, text_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SERVER = "sequential-thinking"  # a small npm server: installs in seconds
THOUGHT = {"thought": "first", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}
BACKENDS = {**FAST_BACKENDS, "call_timeout": 300.0, "connect_timeout": 30.0}


async def _thought_tool(client: Client) -> str:
    names = [t.name for t in (await client.list_tools()).tools if t.name.endswith("__sequentialthinking")]
    assert len(names) == 1, names  # listed from the packaged snapshot before anything is installed
    return names[0]


def _copy_manifest(root: Path, version: str | None = None) -> Path:
    target = root / "manifests" / SERVER
    shutil.copytree(PACKAGED_DIR / SERVER, target)
    if version is not None:
        data = json.loads((target / "server.json").read_text(encoding="utf-8"))
        data["packages"][0]["version"] = version
        (target / "server.json").write_text(json.dumps(data), encoding="utf-8")
    return root / "manifests"


async def test_missing_env_is_installed_on_first_call(tmp_path: Path) -> None:
    settings = HubSettings(
        home=tmp_path / "home",
        catalog={"enabled": [SERVER], "packaged": False, "manifest_dirs": [_copy_manifest(tmp_path)]},
        servers={"alpha": inproc("alpha")},
        backends=BACKENDS,
    )
    entry = load_catalog(settings).entries[SERVER]
    assert not is_installed(settings, entry)
    reported: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(message or "")

    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        result = await client.call_tool(await _thought_tool(client), THOUGHT, progress_callback=on_progress)
    assert not result.is_error, result
    assert "thoughtNumber" in text_of(result)
    assert is_installed(settings, entry)
    assert any(m.startswith(f"installing {SERVER}: ") for m in reported), reported  # the call saw the install


async def test_failed_install_fails_that_server_clearly_and_a_later_start_repairs(tmp_path: Path) -> None:
    manifests = _copy_manifest(tmp_path, version="0.0.0-does-not-exist")
    catalog = {"enabled": [SERVER], "packaged": False, "manifest_dirs": [manifests]}
    settings = HubSettings(
        home=tmp_path / "home", catalog=catalog, servers={"alpha": inproc("alpha")}, backends=BACKENDS
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        failed = await client.call_tool(await _thought_tool(client), THOUGHT)
        other = await client.call_tool("alpha__add", {"a": 40, "b": 2})
    assert failed.is_error
    message = text_of(failed)
    assert SERVER in message, message
    assert "installing it failed" in message, message
    assert "0.0.0-does-not-exist" in message, message
    assert not other.is_error
    assert text_of(other) == "42"
    # the manifest is fixed (the right version): the next hub start builds the env and the call works
    meta_path = manifests / SERVER / "server.json"
    good = json.loads((PACKAGED_DIR / SERVER / "server.json").read_text(encoding="utf-8"))
    assert good["_meta"][META_KEY]["id"] == SERVER
    meta_path.write_text(json.dumps(good), encoding="utf-8")
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        repaired = await client.call_tool(await _thought_tool(client), THOUGHT)
    assert not repaired.is_error, repaired


async def test_concurrent_calls_wait_out_a_long_install(tmp_path: Path) -> None:
    """A second call arriving mid-install waits for it, even when the install outlasts the handshake bound."""
    manifests = _copy_manifest(tmp_path)
    data = json.loads((manifests / SERVER / "server.json").read_text(encoding="utf-8"))
    data["_meta"][META_KEY]["install"]["postInstall"] = [["{python}", "-c", "import time; time.sleep(12)"]]
    (manifests / SERVER / "server.json").write_text(json.dumps(data), encoding="utf-8")
    catalog = {"enabled": [SERVER], "packaged": False, "manifest_dirs": [manifests]}
    backends = {**BACKENDS, "connect_timeout": 2.0}  # handshake bound: 2 x 2 s + grace, well under the install
    settings = HubSettings(
        home=tmp_path / "home", catalog=catalog, servers={"alpha": inproc("alpha")}, backends=backends
    )
    results = []
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        name = await _thought_tool(client)

        async def call() -> None:
            results.append(await client.call_tool(name, THOUGHT))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(1.0)
            tg.start_soon(call)
    assert len(results) == 2
    assert all(not r.is_error for r in results), results
