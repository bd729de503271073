"""The official MCP conformance suite, run by pytest: against the fixture directly and through the hub.

The hub serves streamable HTTP with the fixture server as its only downstream (over stdio, prefixes off), so the
suite exercises the relay of logging, progress, sampling, elicitation, completions, subscriptions and
multi-round-trip requests end to end. Each revision has its baseline of expected failures (empty today).

Client mode runs the other way round: the suite's mock server for each scenario is the hub's only downstream, and
``client.py`` acts as the scenario's client through the hub, so the hub's downstream client is what gets scored.
Its baselines list only the OAuth scenarios (the hub has no OAuth client for downstream servers).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent
RUNNER = HERE / "run_suite.sh"
SUITE = Path(os.environ.get("HANZO_TEST_SERVERS", REPO / ".cache" / "test-servers")) / "bin" / "conformance"
REVISIONS = ["2025-11-25", "2026-07-28"]

pytestmark = [
    pytest.mark.npm,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not SUITE.exists(), reason="conformance suite not installed (scripts/install-test-servers)"),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(port: int, proc: subprocess.Popen[bytes], deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"hub exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError("hub did not start listening")


@pytest.fixture(scope="module")
def hub_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("hub-home")
    config = home / "hub.json"
    fixture = {"command": sys.executable, "args": [str(HERE / "fixture_server.py"), "--stdio"], "cwd": str(REPO)}
    # The fixture is the only server (no prefixes); module-scoped, so memory is turned off here, not by the
    # per-test variable.
    config.write_text(json.dumps({"mcpServers": {"fixture": fixture}, "memory": {"enabled": False}}))
    port = _free_port()
    cmd = [sys.executable, "-m", "hanzo_hub", "serve", "--http", "--port", str(port), "--config", str(config)]
    proc = subprocess.Popen([*cmd, "--home", str(home)], cwd=REPO, stderr=(home / "hub.log").open("wb"))
    try:
        _wait_healthy(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _run(revision: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(RUNNER), revision, str(out), *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )


def _summary(out: Path) -> str:
    log = (out / "suite.log").read_text(errors="replace") if (out / "suite.log").exists() else ""
    return log[-4000:]


@pytest.mark.parametrize("revision", REVISIONS)
def test_fixture_server_passes_the_suite_directly(revision: str, tmp_path: Path) -> None:
    result = _run(revision, tmp_path)
    assert result.returncode == 0, _summary(tmp_path) + result.stderr[-2000:]


@pytest.mark.parametrize("revision", REVISIONS)
def test_hub_passes_the_suite_with_the_fixture_behind_it(revision: str, hub_url: str, tmp_path: Path) -> None:
    result = _run(revision, tmp_path, "--url", hub_url)
    assert result.returncode == 0, _summary(tmp_path) + result.stderr[-2000:]
    checks = list((tmp_path / "checks").glob("*/checks.json"))
    assert len(checks) >= 30  # the suite really ran its scenarios against the hub


# -- client mode: the suite's mock servers behind the hub, the hub's downstream client under test -----------------

CLIENT_RUNNER = HERE / "run_client_suite.sh"
CLIENT_SCENARIOS = {
    "2025-11-25": {
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "json-schema-2020-12-preservation",
    },
    "2026-07-28": {
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    },
}
"""The non-auth client scenarios each revision runs (scored or not); every one of their checks must pass."""


def _run_client(revision: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(CLIENT_RUNNER), revision, str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )


def _non_auth_results(out: Path) -> dict[str, list[dict[str, object]]]:
    """Scenario name -> its checks, for the scenarios outside ``auth/`` (``checks/<scenario>-<time>/``)."""
    return {
        re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", path.parent.name): json.loads(path.read_text())
        for path in (out / "checks").glob("*/checks.json")
    }


@pytest.mark.parametrize("revision", REVISIONS)
def test_hub_downstream_client_passes_the_client_suite(revision: str, tmp_path: Path) -> None:
    """`conformance client --requirements REV` through the hub exits 0 with the client baseline (OAuth only)."""
    result = _run_client(revision, tmp_path)
    results = _non_auth_results(tmp_path)
    bad = [
        f"{scenario}: {check['id']} {check['status']} {check.get('errorMessage', '')}"
        for scenario, checks in results.items()
        for check in checks
        if check.get("status") in ("FAILURE", "WARNING")
    ]
    assert result.returncode == 0, _summary(tmp_path) + "\n".join(bad) + result.stderr[-2000:]
    assert set(results) == CLIENT_SCENARIOS[revision]
    assert not bad  # unscored ones (json-schema-2020-12-preservation at 2025-11-25) included
