"""Execution tools: Python, Node.js and Bash snippets, workspace files and pytest, all inside the sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
from junitparser import JUnitXml
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from hanzo_hub.sandbox import Grants
from servers._common import ToolError, json_result
from servers.code_exec.runner import Runner, produced_files, python_argv, report, scratch_dir, write_files

__all__ = ["register"]

EXEC = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
Code = Annotated[str, Field(min_length=1, max_length=200_000, description="source code to run")]
Seconds = Annotated[float, Field(gt=0, le=600, description="wall-clock limit in seconds (capped by the operator)")]
MemoryMb = Annotated[int, Field(ge=16, le=65536, description="memory limit in MiB (capped by the operator)")]
Stdin = Annotated[str | None, Field(max_length=1_000_000, description="text fed to standard input")]
Files = Annotated[
    dict[str, str],
    Field(max_length=100, description="extra files (relative path → text) written into the scratch folder first"),
]
Args = Annotated[list[Annotated[str, Field(max_length=1000)]], Field(max_length=100, description="arguments")]
INTERPRETERS = {".py": "python", ".js": "node", ".mjs": "node", ".cjs": "node", ".sh": "bash"}


def _node() -> str:
    found = shutil.which("node")
    if found is None:
        raise ToolError("Node.js is not installed on this machine (node not on PATH)")
    return str(Path(found).resolve())


def _workspace_file(runner: Runner, path: str) -> Path:
    root = runner.settings.workspace
    real = (root / path).resolve()
    if not real.is_relative_to(root):
        raise ToolError(f"{path!r} is outside the workspace {root}")
    if not real.is_file():
        raise ToolError(f"{path!r} is not a file in the workspace {root}")
    return real


async def _snippet(
    runner: Runner, argv: list[str], name: str, code: str, files: dict[str, str], stdin: str | None,
    seconds: float, memory_mb: int,
) -> CallToolResult:  # fmt: skip
    async with scratch_dir() as folder:
        await anyio.to_thread.run_sync(write_files, folder, {**files, name: code})
        written = set(files) | {name}
        limits = runner.limits(seconds, memory_mb)
        result = await runner.run([*argv, str(folder / name)], limits, Grants(writable=(folder,)), cwd=str(folder),
                                  stdin=stdin)  # fmt: skip
        return json_result(report(result, limits, files=produced_files(folder, written)))


def _junit(path: Path) -> dict[str, Any]:
    xml = JUnitXml.fromfile(str(path))
    cases = []
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in xml:
        totals["tests"] += suite.tests
        totals["failures"] += suite.failures
        totals["errors"] += suite.errors
        totals["skipped"] += suite.skipped
        for case in suite:
            outcome = "passed"
            message = None
            for res in case.result:
                outcome = type(res).__name__.lower()
                message = (res.message or res.text or "")[:2000]
            cases.append({"name": case.name, "classname": case.classname, "time": case.time, "outcome": outcome,
                          "message": message})  # fmt: skip
    return {**totals, "passed": totals["tests"] - totals["failures"] - totals["errors"] - totals["skipped"],
            "cases": cases}  # fmt: skip


def register(mcp: MCPServer, runner: Runner) -> None:
    """Add the execution tools to ``mcp``."""

    @mcp.tool(annotations=EXEC)
    async def exec_python(
        code: Code, files: Files | None = None, stdin: Stdin = None, timeout: Seconds = 30, memory_mb: MemoryMb = 512
    ) -> CallToolResult:
        """Run a Python 3 script in the sandbox (no network unless the operator granted it, only a scratch folder
        writable, time/memory/CPU limits). Returns exit code, stdout, stderr, which limit stopped it (if any) and files
        the script created. A failing script is a normal result with ok=false. For state kept between calls use a
        kernel (kernel_start).
        """
        return await _snippet(runner, python_argv(), "main.py", code, files or {}, stdin, timeout, memory_mb)

    @mcp.tool(annotations=EXEC)
    async def exec_node(
        code: Code, files: Files | None = None, stdin: Stdin = None, timeout: Seconds = 30, memory_mb: MemoryMb = 1024
    ) -> CallToolResult:
        """Run a JavaScript program with Node.js in the sandbox (CommonJS main.js; same isolation and limits as
        exec_python). Returns exit code, stdout, stderr, the limit hit and created files.
        """
        return await _snippet(runner, [_node()], "main.js", code, files or {}, stdin, timeout, memory_mb)

    @mcp.tool(annotations=EXEC)
    async def exec_bash(
        script: Annotated[str, Field(min_length=1, max_length=200_000, description="bash script")],
        files: Files | None = None,
        stdin: Stdin = None,
        timeout: Seconds = 30,
        memory_mb: MemoryMb = 512,
    ) -> CallToolResult:
        """Run a Bash script in the sandbox (coreutils and the host's /usr tools, no network unless granted, only the
        scratch folder and /tmp writable). Returns exit code, stdout, stderr, the limit hit and created files.
        """
        return await _snippet(runner, ["/bin/bash", "--noprofile", "--norc"], "main.sh", script, files or {}, stdin,
                              timeout, memory_mb)  # fmt: skip

    @mcp.tool(annotations=EXEC)
    async def exec_file(
        path: Annotated[str, Field(min_length=1, description="file relative to the workspace (.py, .js, .mjs, .sh)")],
        args: Args | None = None,
        stdin: Stdin = None,
        timeout: Seconds = 60,
        memory_mb: MemoryMb = 1024,
    ) -> CallToolResult:
        """Run an existing script from the workspace in the sandbox, picking the interpreter from its extension. The
        workspace is mounted read-only and is the working directory; writes go to /tmp inside the sandbox.
        """
        real = _workspace_file(runner, path)
        kind = INTERPRETERS.get(real.suffix)
        if kind is None:
            raise ToolError(f"cannot run {real.suffix or 'extension-less'} files; use one of {sorted(INTERPRETERS)}")
        argv = {"python": python_argv(), "node": [_node()] if kind == "node" else [], "bash": ["/bin/bash"]}[kind]
        limits = runner.limits(timeout, memory_mb)
        root = runner.settings.workspace
        result = await runner.run([*argv, str(real), *(args or [])], limits, Grants(readable=(root,)),
                                  cwd=str(real.parent), stdin=stdin)  # fmt: skip
        return json_result(report(result, limits, path=str(real.relative_to(root)), interpreter=kind))

    @mcp.tool(annotations=EXEC)
    async def pytest_run(
        files: Annotated[dict[str, str], Field(min_length=1, max_length=100, description="test and module files")],
        select: Annotated[str | None, Field(max_length=500, description="pytest -k expression")] = None,
        timeout: Seconds = 120,
        memory_mb: MemoryMb = 1024,
    ) -> CallToolResult:
        """Write the given files (tests plus the code they import) to a scratch folder and run pytest on it in the
        sandbox. Returns the JUnit XML summary (tests, passed, failures, errors, skipped and each case with its
        outcome and failure message) plus pytest's output.
        """
        async with scratch_dir() as folder:
            await anyio.to_thread.run_sync(write_files, folder, files)
            report_xml = str(folder / "junit.xml")
            options = ["-q", "-p", "no:cacheprovider", "--junitxml", report_xml, "-o", "junit_family=xunit2"]
            argv = python_argv("-m", "pytest", *options, *(["-k", select] if select else []), str(folder))
            limits = runner.limits(timeout, memory_mb)
            result = await runner.run(argv, limits, Grants(writable=(folder,)), cwd=str(folder))
            body = report(result, limits)
            junit = folder / "junit.xml"
            if not junit.is_file():
                raise ToolError(f"pytest produced no report ({body['limit_message'] or body['stderr'][-500:]})")
            summary = await anyio.to_thread.run_sync(_junit, junit)
            extra = {"limit": result.limit, "limit_message": body["limit_message"], "output": body["stdout"][-20_000:]}
            return json_result({**summary, "exit_code": result.exit_code, **extra})

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True))
    async def sandbox_info() -> CallToolResult:
        """What the code runs under: the sandbox backend, the network grant, the workspace folder, the ceilings for
        time and memory, the interpreters available (Python version, Node.js, Bash), and ``working``: whether a
        probe run inside the sandbox succeeded (``problem`` says why not). Call it before planning code that needs
        network access or long run times, or when every run fails the same way.
        """
        backend = await runner.sandbox()
        limits = runner.limits(runner.settings.max_seconds, runner.settings.max_memory_mb)
        probe = await runner.run(python_argv("-c", "import sys; print(sys.version.split()[0])"), limits, Grants())
        s = runner.settings
        return json_result({"sandbox": backend.name, "network": s.network, "workspace": str(s.workspace),
                            "max_seconds": s.max_seconds, "max_memory_mb": s.max_memory_mb,
                            "python": probe.stdout.decode().strip() or None, "node": shutil.which("node"),
                            "bash": shutil.which("bash"), "max_kernels": s.max_kernels, "working": probe.ok,
                            "problem": None if probe.ok else probe.stderr.decode(errors="replace")[-500:]})  # fmt: skip
