"""Build and CI tools: JUnit XML reports (junitparser), Makefile targets and running a make target."""

from __future__ import annotations

import re
from typing import Annotated, Any
from xml.etree.ElementTree import ParseError

from junitparser import Error, Failure, JUnitXml, Skipped, TestSuite
from junitparser.junitparser import JUnitXmlError
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.devops._util import PURE, Content, FilePath, inside_workspace, off_loop, read_source, run_tool, workspace

__all__ = ["register"]

TARGET = re.compile(r"^(?P<names>[A-Za-z0-9_.%/${}()-]+(?:\s+[A-Za-z0-9_.%/${}()-]+)*)\s*:(?![=:])(?P<deps>[^#;]*)")
HELP = re.compile(r"##\s*(.+)$")
Target = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-/]+$", max_length=200, description="make target")]


def _junit(text: str) -> dict[str, Any]:
    try:
        xml = JUnitXml.fromstring(text)
    except (ParseError, JUnitXmlError, ValueError, SyntaxError) as exc:  # lxml's XMLSyntaxError is a SyntaxError
        raise ToolError(f"not a JUnit XML report: {exc}") from exc
    parsed: Any = xml
    suites = [parsed] if isinstance(parsed, TestSuite) else list(parsed)
    totals = {"suites": len(suites), "tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    failing, slowest = [], []
    for suite in suites:
        for case in suite:
            totals["tests"] += 1
            totals["time"] += case.time or 0.0
            slowest.append((case.time or 0.0, f"{case.classname}.{case.name}"))
            for res in case.result:
                kind = {Failure: "failures", Error: "errors", Skipped: "skipped"}.get(type(res))
                if kind:
                    totals[kind] += 1
                if kind in ("failures", "errors"):
                    failing.append({"suite": suite.name, "case": case.name, "classname": case.classname,
                                    "kind": kind[:-1], "message": (res.message or "")[:1000],
                                    "details": (res.text or "")[:2000]})  # fmt: skip
    totals["passed"] = totals["tests"] - totals["failures"] - totals["errors"] - totals["skipped"]
    totals["time"] = round(totals["time"], 3)
    slow = [{"case": n, "time": t} for t, n in sorted(slowest, reverse=True)[:10]]
    return {**totals, "success": not failing, "failing": failing, "slowest": slow}


def _targets(text: str) -> list[list[Any]]:
    phony: set[str] = set()
    rows: dict[str, list[Any]] = {}
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith(("\t", "#")) or not line.strip():
            continue
        match = TARGET.match(line)
        if not match:
            continue
        names = match.group("names").split()
        deps = match.group("deps").split()
        if names == [".PHONY"]:
            phony.update(deps)
            continue
        help_match = HELP.search(line)
        for name in names:
            if name.startswith(".") or "%" in name:
                continue
            rows.setdefault(name, [name, deps, help_match.group(1).strip() if help_match else None, False])
    for name, row in rows.items():
        row[3] = name in phony
    return list(rows.values())


def register(mcp: MCPServer) -> None:
    """Add the build tools to ``mcp``."""

    @mcp.tool(annotations=PURE)
    async def junit_summary(content: Content = None, path: FilePath = None) -> CallToolResult:
        """Summarise a JUnit/xUnit XML test report (pytest, Maven, Jest, Go...): totals of tests, passed, failures,
        errors, skipped and time; every failing case with its message and details; the ten slowest cases. Use it to
        explain a red CI run.
        """
        text, _ = await off_loop(read_source, content, path)
        return json_result(await off_loop(_junit, text))

    @mcp.tool(annotations=PURE)
    async def makefile_targets(content: Content = None, path: FilePath = None) -> CallToolResult:
        """List a Makefile's targets with their prerequisites, the ``## help`` comment on the target line and whether
        it is .PHONY (pattern and special targets left out). Use it to learn how a project builds, tests and deploys.
        """
        text, label = await off_loop(read_source, content, path)
        rows = await off_loop(_targets, text)
        return table_result(["target", "prerequisites", "help", "phony"], rows, title=f"targets of {label}")

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False,
                                          openWorldHint=False))  # fmt: skip
    async def make_run(
        target: Target,
        directory: Annotated[
            str, Field(max_length=1000, description="folder with the Makefile, in the workspace")
        ] = ".",
        dry_run: Annotated[bool, Field(description="only print the commands (make -n)")] = False,
        variables: Annotated[dict[str, str] | None, Field(description="make variables, NAME=value")] = None,
        timeout: Annotated[float, Field(gt=0, le=600, description="seconds before make is stopped")] = 120,
    ) -> CallToolResult:
        """Run ``make TARGET`` in a workspace folder (or with dry_run only print what it would run) and return the
        exit code, stdout and stderr. Recipes run as this server's user: check them first with dry_run.
        """
        folder = inside_workspace(directory, kind="dir")
        assigns = []
        for key, value in (variables or {}).items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ToolError(f"invalid make variable name {key!r}")
            assigns.append(f"{key}={value}")
        argv = ["make", "--no-print-directory", *(["-n"] if dry_run else []), *assigns, target]
        result = await run_tool(argv, cwd=folder, timeout=timeout)
        return json_result({"target": target, "directory": str(folder.relative_to(workspace())), "dry_run": dry_run,
                            "exit_code": result.returncode, "stdout": result.stdout.decode(errors="replace")[-50_000:],
                            "stderr": result.stderr.decode(errors="replace")[-20_000:]})  # fmt: skip
