"""Adversarial code in real sandboxes (bwrap always; docker when a daemon answers): every attempt fails safely.

Each test runs through the ``sandbox`` fixture, which also asserts that nothing the run started is still alive.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from hanzo_hub.config import SandboxSettings
from hanzo_hub.errors import SandboxUnavailable
from hanzo_hub.sandbox import Grants, Limits, Sandbox, load_sandbox
from hanzo_hub.sandbox.base import python_code
from hanzo_hub.sandbox.bwrap import BwrapSandbox
from hanzo_hub.sandbox.vault import Vault

pytestmark = pytest.mark.sandbox

SMALL = Limits(cpus=1.0, memory_bytes=256 * 1024**2, pids=32, wall_seconds=10.0)


async def test_harmless_code_runs_and_writes_its_project(sandbox: Sandbox, grants: Grants) -> None:
    project = grants.writable[0]
    code = f"open({str(project / 'out.txt')!r}, 'w').write('hi'); print('done')"
    result = await sandbox.run(python_code(code), SMALL, grants)
    assert result.ok, result.stderr
    assert result.stdout == b"done\n"
    assert (project / "out.txt").read_text() == "hi"


async def test_loopback_server_of_the_host_is_unreachable(
    sandbox: Sandbox, grants: Grants, victim: socket.socket
) -> None:
    port = victim.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')"
    result = await sandbox.run(python_code(code), SMALL, grants)
    assert result.exit_code != 0
    assert b"connected" not in result.stdout
    with pytest.raises(BlockingIOError):
        victim.accept()


async def test_writes_outside_the_project_fail(sandbox: Sandbox, grants: Grants, tmp_path: Path) -> None:
    result = await sandbox.run(python_code("open('/usr/evil', 'w').write('x')"), SMALL, grants)
    assert result.exit_code != 0
    # elsewhere the sandbox's root and /tmp are its own tmpfs: writes may succeed there but vanish with it
    target = tmp_path / "escaped.txt"
    paths = (str(target), "/etc/evil", "/root/evil", "/usr/evil")
    for path in paths[:3]:
        await sandbox.run(python_code(f"open({path!r}, 'w').write('x')"), SMALL, grants)
    assert not any(map(os.path.exists, paths))


async def test_another_projects_files_and_symlinks_out_are_unreadable(
    sandbox: Sandbox, grants: Grants, projects: tuple[Path, Path]
) -> None:
    a, b = projects
    for path in (b / "secret.txt", a / "link", "/etc/shadow"):
        result = await sandbox.run(python_code(f"print(open({str(path)!r}).read())"), SMALL, grants)
        assert result.exit_code != 0
        assert b"private" not in result.stdout


async def test_fork_bomb_is_stopped_by_the_pids_limit(sandbox: Sandbox, grants: Grants) -> None:
    code = "import os\nwhile True:\n    try: os.fork()\n    except OSError: os._exit(3)"
    result = await sandbox.run(python_code(code), SMALL.with_(wall_seconds=5.0), grants)
    assert result.exit_code != 0
    if sandbox.name == "bwrap":
        assert result.limit in {"pids", "wall"}


async def test_allocation_past_the_memory_limit_is_killed(sandbox: Sandbox, grants: Grants) -> None:
    result = await sandbox.run(python_code("x = bytearray(600 * 1024**2); print(len(x))"), SMALL, grants)
    assert result.exit_code != 0
    assert result.limit == "memory"


async def test_busy_loop_is_stopped_by_the_wall_clock(sandbox: Sandbox, grants: Grants) -> None:
    result = await sandbox.run(python_code("while True: pass"), SMALL.with_(wall_seconds=1.0), grants)
    assert result.limit == "wall"


async def test_busy_loop_is_stopped_by_the_cpu_limit(sandbox: Sandbox, grants: Grants) -> None:
    result = await sandbox.run(python_code("while True: pass"), SMALL.with_(cpu_seconds=1.0), grants)
    assert result.limit == "cpu"


async def test_vault_and_hub_environment_are_invisible(
    sandbox: Sandbox, grants: Grants, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = Vault(tmp_path / "home" / "vault", keyring_service=None)
    vault.set("API_TOKEN", "sk-live-0123456789")
    monkeypatch.setenv("HANZO_TEST_PARENT_SECRET", "parent-env-value-42")
    code = (
        "import os, glob\n"
        f"print(sorted(os.environ))\n"
        "for p in glob.glob('/proc/*/environ'):\n"
        "    try: print(open(p).read())\n"
        "    except OSError: pass\n"
        f"print(open({str(vault.key_file)!r}).read())\n"
    )
    result = await sandbox.run(python_code(code), SMALL, grants)
    assert result.exit_code != 0  # the key file does not exist inside
    assert b"parent-env-value-42" not in result.stdout
    assert b"HANZO_TEST_PARENT_SECRET" not in result.stdout
    assert vault.key_file.read_bytes() not in result.stdout


async def test_printed_secret_is_redacted(sandbox: Sandbox, grants: Grants, tmp_path: Path) -> None:
    vault = Vault(tmp_path / "vault", keyring_service=None)
    vault.set("API_TOKEN", "sk-live-0123456789")
    env = {"API_TOKEN": vault.get("API_TOKEN") or ""}
    result = await sandbox.run(
        python_code("import os; print('token', os.environ['API_TOKEN'])"), SMALL, grants, env=env
    )
    shown = vault.redactor().redact(result.stdout.decode())
    assert shown == "token [redacted:API_TOKEN]\n"


async def test_wrapped_stdio_command_runs_confined(grants: Grants, tmp_path: Path) -> None:
    import anyio

    sandbox = BwrapSandbox()
    plan = sandbox.wrap(python_code("import os; print(os.listdir('/tmp'))"), {"X": "1"}, None, SMALL, grants)
    try:
        done = await anyio.run_process(plan.argv, env=plan.env or None, check=False)
    finally:
        await plan.aclose()
    assert done.returncode == 0, done.stderr
    assert str(grants.writable[0].name).encode() in done.stdout or done.stdout.startswith(b"[")


def test_missing_bubblewrap_is_reported_with_the_reason() -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("shutil.which", lambda name, *args, **kwargs: None)
        with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
            load_sandbox("bwrap", SandboxSettings())


def test_unknown_backend_is_unavailable() -> None:
    with pytest.raises(SandboxUnavailable):
        load_sandbox("firejail", SandboxSettings())


async def test_unsandboxed_runner_applies_limits_and_leaves_nothing(grants: Grants) -> None:
    import psutil

    from hanzo_hub.sandbox.unsandboxed import UnsandboxedRunner

    runner = UnsandboxedRunner()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    ok = await runner.run(python_code("print('plain')"), SMALL, grants)
    assert ok.ok
    assert ok.stdout == b"plain\n"
    code = "import subprocess, sys; subprocess.Popen(['/usr/bin/sleep', '30']); sys.exit(0)"
    assert (await runner.run(python_code(code), SMALL, grants)).exit_code == 0
    assert (await runner.run(python_code("while True: pass"), SMALL.with_(wall_seconds=0.5), grants)).limit == "wall"
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()
