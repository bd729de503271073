"""awslabs' OpenAPI server against a real REST API on loopback (``tests/fixtures/notes_api.py``).

The catalog ships no ``tools.json`` for it: its tools are generated from the user's spec, so these tests name the
tools the spec must give. The API's bearer token lives in the hub's vault and reaches the server as ``AUTH_TOKEN``
only; the client sees it redacted even when the API echoes it back.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hanzo_hub.config import HubSettings
from hanzo_hub.sandbox.vault import Vault
from tests.catalog.live import services
from tests.catalog.live.helpers import HOME, SANDBOX, Call, run_live, text
from tests.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

OPERATIONS = ["createNote", "deleteNote", "getNote", "listNotes", "whoami"]


@dataclass(frozen=True)
class NotesApi:
    url: str
    token: str
    spec: Path
    log: Path


@pytest.fixture
def api(tmp_path: Path) -> Iterator[NotesApi]:
    port, token = services.free_port(), f"tok-{secrets.token_hex(12)}"
    spec, log = tmp_path / "notes.json", tmp_path / "notes-api.log"
    cmd = [sys.executable, str(REPO / "tests" / "fixtures" / "notes_api.py"), str(port), token, str(spec)]
    with services.local_process(cmd, log, port, "notes API"):
        yield NotesApi(f"http://127.0.0.1:{port}", token, spec, log)


@pytest.fixture
def vault() -> Iterator[Vault]:
    """The live tests' vault; the secrets a test sets are deleted afterwards (other tests share the home)."""
    store = Vault(HubSettings(home=HOME, sandbox=SANDBOX).vault_dir, keyring_service=None)
    yield store
    store.delete("AUTH_TOKEN")


def _env(api: NotesApi, **extra: str) -> dict[str, str]:
    return {
        "API_NAME": "notes",
        "API_BASE_URL": api.url,
        "ALLOW_INSECURE_HTTP": "true",
        "ALLOW_PRIVATE_NETWORKS": "true",
        **extra,
    }


async def test_operations_become_tools_and_the_token_stays_in_the_vault(
    tmp_path: Path, api: NotesApi, vault: Vault
) -> None:
    vault.set("AUTH_TOKEN", api.token)
    calls = [
        Call("createNote", {"text": "buy oat milk", "tag": "home"}, "buy oat milk"),
        Call("createNote", {"text": "file the report", "tag": "work"}, "file the report"),
        Call("getNote", {"id": 1}, "buy oat milk"),
        Call("listNotes", {"tag": "work"}, "file the report"),
        Call("getNote", {"id": 99}, "404", error=True),
        Call("deleteNote", {"id": 1}, ""),
        Call("getNote", {"id": 1}, "404", error=True),
        Call("whoami", {}, "[redacted:AUTH_TOKEN]"),
    ]
    env = _env(api, API_SPEC_URL=f"{api.url}/openapi.json", AUTH_TYPE="bearer")
    outcome = await run_live("openapi", tmp_path, calls, env=env, tools=OPERATIONS)
    assert "buy oat milk" not in text(outcome.results[3])
    for result in outcome.results:
        assert api.token not in json.dumps(result.model_dump(mode="json"))
    tool = next(t for t in outcome.tools if t.name == "createNote")
    assert tool.input_schema["required"] == ["text"]
    assert '"GET /whoami HTTP/1.1" 200' in api.log.read_text(encoding="utf-8")


async def test_a_spec_file_in_the_data_folder_and_no_token(tmp_path: Path, api: NotesApi) -> None:
    """The sandbox grants the server ``{home}/data/openapi`` only, so the spec file goes there; without a token the
    API refuses the calls and the server says so as a tool error."""
    folder = HOME / "data" / "openapi"
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / f"notes-{secrets.token_hex(4)}.json"
    shutil.copyfile(api.spec, spec)
    try:
        calls = [Call("listNotes", {}, "401", error=True)]
        await run_live("openapi", tmp_path, calls, env=_env(api, API_SPEC_PATH=str(spec)), tools=OPERATIONS)
    finally:
        spec.unlink()
    assert '"GET /notes HTTP/1.1" 401' in api.log.read_text(encoding="utf-8")
