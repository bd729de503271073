"""The code-exec server over MCP: code really runs in the bwrap sandbox, kernels in sandboxed ipykernels."""

from __future__ import annotations

import base64
import shutil
import socket
import struct
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import psutil
import pytest
from mcp_types import ImageContent

from servers.code_exec import server
from tests.servers.conftest import Client, err, ok, text

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

EXPECTED_TOOLS = 17


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(server.mcp) as connected:
        yield connected


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.setattr(server.runner, "settings", replace(server.runner.settings, workspace=root))
    return root


@pytest.fixture
def victim() -> Iterator[socket.socket]:
    """A TCP listener on the host's loopback that sandboxed code must not reach."""
    listener = socket.create_server(("127.0.0.1", 0))
    yield listener
    listener.close()


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


async def test_lists_every_tool(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) == EXPECTED_TOOLS
    assert all(t.annotations is not None for t in tools)


async def test_exec_python_runs_in_the_sandbox(client: Client) -> None:
    code = "import os, sys\nprint(sys.stdin.read().upper())\nopen('out.txt', 'w').write('x' * 10)\nprint(os.getpid())"
    result = ok(await client.call_tool("exec_python", {"code": code, "stdin": "hello"}))
    assert result["ok"] is True
    lines = result["stdout"].splitlines()
    assert lines[0] == "HELLO"
    assert int(lines[1]) < 10  # its own pid namespace
    assert result["files"] == [{"path": "out.txt", "bytes": 10}]
    failing = ok(await client.call_tool("exec_python", {"code": "raise SystemExit(3)"}))
    assert failing["ok"] is False
    assert failing["exit_code"] == 3
    helper = {"helper.py": "VALUE = 41\n"}
    imported = ok(
        await client.call_tool("exec_python", {"code": "import helper; print(helper.VALUE + 1)", "files": helper})
    )
    assert imported["stdout"].strip() == "42"


async def test_escapes_fail_safely(client: Client, tmp_path: Path, victim: socket.socket) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    code = f"""
import pathlib, socket
for attempt in ("write", "read", "net"):
    try:
        if attempt == "write":
            pathlib.Path({str(outside / "pwned.txt")!r}).write_text("x")
        elif attempt == "read":
            print(pathlib.Path({str(outside / "secret.txt")!r}).read_text())
        else:
            socket.create_connection(("127.0.0.1", {victim.getsockname()[1]}), timeout=2)
        print(attempt, "ESCAPED")
    except OSError as exc:
        print(attempt, "blocked", type(exc).__name__)
"""
    result = ok(await client.call_tool("exec_python", {"code": code}))
    assert "ESCAPED" not in result["stdout"]
    assert result["stdout"].count("blocked") == 3
    assert not (outside / "pwned.txt").exists()
    assert result["network"] == "none"


async def test_limits_stop_runaway_code_and_are_reported(client: Client) -> None:
    spin = ok(await client.call_tool("exec_python", {"code": "while True: pass", "timeout": 1}))
    assert spin["limit"] == "wall"
    assert spin["limit_message"] == "stopped by the wall-clock time limit (1.0 s)"
    assert spin["ok"] is False
    hog = ok(await client.call_tool("exec_python", {"code": "x = bytearray(400 * 1024 * 1024)", "memory_mb": 64}))
    assert hog["limit"] == "memory"
    assert "64 MiB" in hog["limit_message"]
    assert err(await client.call_tool("exec_python", {"code": "print(1)", "timeout": 0}))
    assert "relative path" in err(await client.call_tool("exec_python", {"code": "1", "files": {"../x.py": ""}}))


async def test_exec_node_and_bash(client: Client) -> None:
    node = ok(await client.call_tool("exec_node", {"code": "console.log([1, 2, 3].map(x => x * 2).join(','))"}))
    assert node["stdout"].strip() == "2,4,6"
    bash = ok(
        await client.call_tool(
            "exec_bash", {"script": 'read name; echo "hi $name"; echo oops >&2; exit 4', "stdin": "bob\n"}
        )
    )
    assert bash["stdout"] == "hi bob\n"
    assert bash["stderr"] == "oops\n"
    assert bash["exit_code"] == 4


async def test_exec_file_runs_workspace_scripts_read_only(client: Client, workspace: Path) -> None:
    (workspace / "data.txt").write_text("3\n4\n")
    (workspace / "sum.py").write_text(
        "import sys\nprint(sum(int(x) for x in open('data.txt')), sys.argv[1:])\n"
        "try:\n    open('new.txt', 'w')\nexcept OSError as e:\n    print('read-only', type(e).__name__)\n"
    )
    (workspace / "greet.sh").write_text("echo sh:$1\n")
    result = ok(await client.call_tool("exec_file", {"path": "sum.py", "args": ["a"]}))
    assert result["stdout"].splitlines() == ["7 ['a']", "read-only OSError"]
    assert not (workspace / "new.txt").exists()
    assert ok(await client.call_tool("exec_file", {"path": "greet.sh", "args": ["z"]}))["stdout"] == "sh:z\n"
    assert "outside the workspace" in err(await client.call_tool("exec_file", {"path": "../x.py"}))
    (workspace / "notes.md").write_text("x")
    assert "cannot run .md" in err(await client.call_tool("exec_file", {"path": "notes.md"}))


async def test_pytest_run_summarises_junit(client: Client) -> None:
    files = {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "test_calc.py": "from calc import add\nimport pytest\n\ndef test_ok():\n    assert add(1, 2) == 3\n\n"
        "def test_bad():\n    assert add(1, 1) == 3\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n",
    }
    summary = ok(await client.call_tool("pytest_run", {"files": files}))
    assert (summary["tests"], summary["passed"], summary["failures"], summary["skipped"]) == (3, 1, 1, 1)
    outcomes = {c["name"]: c["outcome"] for c in summary["cases"]}
    assert outcomes == {"test_ok": "passed", "test_bad": "failure", "test_later": "skipped"}
    selected = ok(await client.call_tool("pytest_run", {"files": files, "select": "ok"}))
    assert selected["passed"] == 1
    assert selected["failures"] == 0


async def test_sandbox_info(client: Client) -> None:
    info = ok(await client.call_tool("sandbox_info", {}))
    assert info["sandbox"] == "bwrap"
    assert info["network"] == "none"
    assert info["python"].startswith("3.")
    assert info["working"] is True
    assert info["problem"] is None


async def test_kernel_keeps_state_shows_images_and_reports_errors(client: Client) -> None:
    started = ok(await client.call_tool("kernel_start", {"name": "analysis"}))
    kid = started["kernel_id"]
    assert _kernel_processes()  # the sandboxed kernel runs under this process
    try:
        first = ok(await client.call_tool("kernel_execute", {"kernel_id": kid, "code": "x = 20\nprint('set')"}))
        assert first["stdout"] == "set\n"
        second = ok(await client.call_tool("kernel_execute", {"kernel_id": kid, "code": "x * 2 + 2"}))
        assert second["results"] == ["42"]
        png = base64.b64encode(_png()).decode()
        cell = (
            f"import base64\nfrom IPython.display import Image, display\ndisplay(Image(data=base64.b64decode('{png}')))"
        )
        shown = await client.call_tool("kernel_execute", {"kernel_id": kid, "code": cell})
        images = [c for c in shown.content if isinstance(c, ImageContent)]
        assert len(images) == 1
        assert base64.b64decode(images[0].data) == _png()
        failed = ok(await client.call_tool("kernel_execute", {"kernel_id": kid, "code": "1 / 0"}))
        assert failed["status"] == "error"
        assert failed["error"]["name"] == "ZeroDivisionError"
        slow = ok(
            await client.call_tool(
                "kernel_execute", {"kernel_id": kid, "code": "import time; time.sleep(30)", "timeout": 1}
            )
        )
        assert slow["timed_out"] is True
        after = ok(await client.call_tool("kernel_execute", {"kernel_id": kid, "code": "x"}))
        assert after["results"] == ["20"]
        listed = ok(await client.call_tool("kernel_list", {}))
        assert [kid, "analysis"] == listed["rows"][0][:2]
        assert listed["rows"][0][4] is True
    finally:
        stopped = ok(await client.call_tool("kernel_shutdown", {"kernel_id": kid}))
    assert stopped["executions"] == 6
    assert "no kernel" in err(await client.call_tool("kernel_execute", {"kernel_id": kid, "code": "x"}))
    assert ok(await client.call_tool("kernel_list", {}))["rows"] == []
    assert _kernel_processes() == []


def _kernel_processes() -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "ipykernel_launcher" in " ".join(child.cmdline()):
                found.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


async def test_kernel_interrupt_stops_a_running_cell(client: Client, victim: socket.socket) -> None:
    kid = ok(await client.call_tool("kernel_start", {}))["kernel_id"]
    started = server.pool.kernels[kid].folder / "started"  # the kernel's own folder, its working directory
    results = {}

    async def long_cell() -> None:
        code = "import pathlib, time\npathlib.Path('started').touch()\ntime.sleep(60)"
        results["cell"] = ok(await client.call_tool("kernel_execute", {"kernel_id": kid, "code": code}))

    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(long_cell)
                while not await anyio.Path(started).exists():  # noqa: ASYNC110 - the signal is a file the sandbox writes
                    await anyio.sleep(0.05)
                interrupted = ok(await client.call_tool("kernel_interrupt", {"kernel_id": kid}))
                assert interrupted["interrupted"] is True
        assert results["cell"]["error"]["name"] == "KeyboardInterrupt"
        port = victim.getsockname()[1]
        code = (
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "    print('ESCAPED')\nexcept OSError as e:\n    print('blocked')"
        )
        net = ok(await client.call_tool("kernel_execute", {"kernel_id": kid, "code": code}))
        assert net["stdout"].strip() == "blocked"
    finally:
        ok(await client.call_tool("kernel_shutdown", {"kernel_id": kid}))
    assert err(await client.call_tool("kernel_interrupt", {"kernel_id": "k-00000000"}))


async def test_static_python_tools(client: Client) -> None:
    good = ok(await client.call_tool("python_syntax_check", {"code": "def f(x):\n    return x\n"}))
    assert good["valid"] is True
    bad = ok(await client.call_tool("python_syntax_check", {"code": "def f(:\n    pass\n"}))
    assert bad["valid"] is False
    assert bad["line"] == 1
    source = (
        "import os\nimport numpy as np\nfrom . import sibling\nLIMIT = 3\n\n"
        "class Shape(Base):\n    '''A shape.'''\n    def area(self) -> float:\n        return 0.0\n\n"
        "async def load(path: str, *, retries: int = 2) -> bytes:\n    return b''\n"
    )
    outline = ok(await client.call_tool("python_ast_outline", {"code": source}))["outline"]
    by_name = {e["name"]: e for e in outline}
    assert by_name["Shape"]["bases"] == ["Base"]
    assert by_name["Shape"]["doc"] == "A shape."
    assert by_name["Shape"]["children"][0]["name"] == "area"
    assert by_name["load"]["kind"] == "async function"
    assert by_name["load"]["signature"] == "(path: str, *, retries: int=2) -> bytes"
    assert by_name["LIMIT"]["kind"] == "variable"
    assert "syntax error" in err(await client.call_tool("python_ast_outline", {"code": "class:"}))
    imports = ok(await client.call_tool("python_imports", {"code": source}))
    assert [r[:3] for r in imports["rows"]] == [
        ["os", "os", "stdlib"],
        ["numpy", "numpy", "third-party"],
        [".", "", "relative"],
    ]
    assert imports["third_party"] == ["numpy"]


async def test_ruff_tools(client: Client) -> None:
    code = "import os\nimport sys\n\nprint(sys.argv)\n"
    lint = ok(await client.call_tool("ruff_check", {"code": code, "select": ["F"], "fix": True}))
    assert lint["rows"] == [["F401", "`os` imported but unused", 1, 8, True]]
    assert lint["fixed_code"] == "import sys\n\nprint(sys.argv)\n"
    formatted = ok(await client.call_tool("ruff_format", {"code": "x = {  'a':1 }\n"}))
    assert formatted["code"] == 'x = {"a": 1}\n'
    assert formatted["changed"] is True
    assert "cannot format" in err(await client.call_tool("ruff_format", {"code": "def ("}))
    assert err(await client.call_tool("ruff_check", {"code": "x", "select": ["not a rule"]}))


async def test_requirements_list(client: Client, workspace: Path) -> None:
    reqs = "# deps\nrequests==2.32.0\nnumpy>=1.26,<3 ; python_version >= '3.10'\nrich[jupyter]\n-r other.txt\n=bad=\n"
    parsed = ok(await client.call_tool("requirements_list", {"text": reqs}))
    rows = {r[0]: r for r in parsed["rows"]}
    assert rows["requests"][5] is True
    assert rows["numpy"][1] == "<3,>=1.26"
    assert rows["numpy"][3] == 'python_version >= "3.10"'
    assert rows["rich"][2] == ["jupyter"]
    assert parsed["options"] == [{"line": 5, "option": "-r other.txt"}]
    assert parsed["invalid"][0]["line"] == 6
    (workspace / "requirements.txt").write_text("flask==3.0.0\n")
    from_file = ok(await client.call_tool("requirements_list", {"path": "requirements.txt"}))
    assert from_file["rows"][0][:2] == ["flask", "==3.0.0"]
    assert "exactly one" in err(await client.call_tool("requirements_list", {}))
    assert "inside the workspace" in err(await client.call_tool("requirements_list", {"path": "../../etc/passwd"}))
    assert text(await client.call_tool("requirements_list", {"text": "a==1"})).startswith("requirements")
