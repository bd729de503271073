"""Static tools on given source (nothing is executed): syntax check, AST outline, imports, ruff lint and format,
and requirements parsing.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from packaging.requirements import InvalidRequirement, Requirement
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.code_exec.runner import Runner

__all__ = ["register"]

PURE = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
Source = Annotated[str, Field(min_length=1, max_length=500_000, description="Python source code")]
RUFF_TIMEOUT = 30.0
STDLIB = frozenset(sys.stdlib_module_names)


def _parse(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise ToolError(f"syntax error at line {exc.lineno}, column {exc.offset}: {exc.msg}") from exc


def _outline(tree: ast.Module) -> list[dict[str, Any]]:
    def visit(node: ast.AST, depth: int) -> list[dict[str, Any]]:
        found = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                kind = "class" if isinstance(child, ast.ClassDef) else "function" if depth == 0 else "method"
                if isinstance(child, ast.AsyncFunctionDef):
                    kind = "async " + kind
                doc = (ast.get_docstring(child) or "")[:200]
                entry: dict[str, Any] = {"kind": kind, "name": child.name, "line": child.lineno,
                                         "end_line": child.end_lineno, "doc": doc}  # fmt: skip
                if not isinstance(child, ast.ClassDef):
                    entry["signature"] = f"({ast.unparse(child.args)})" + (
                        f" -> {ast.unparse(child.returns)}" if child.returns else ""
                    )
                else:
                    entry["bases"] = [ast.unparse(b) for b in child.bases]
                entry["decorators"] = [ast.unparse(d) for d in child.decorator_list]
                entry["children"] = visit(child, depth + 1) if isinstance(child, ast.ClassDef) else []
                found.append(entry)
            elif depth == 0 and isinstance(child, ast.Assign | ast.AnnAssign):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                found.extend({"kind": "variable", "name": ast.unparse(t), "line": child.lineno} for t in targets)
        return found

    return visit(tree, 0)


def _imports(tree: ast.Module) -> list[list[Any]]:
    rows: dict[str, list[Any]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [(a.name, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [(node.module, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [("." * node.level + (node.module or ""), "relative")]
        else:
            continue
        for module, _ in names:
            top = module.split(".")[0]
            kind = "relative" if module.startswith(".") else "stdlib" if top in STDLIB else "third-party"
            rows.setdefault(module, [module, top, kind, node.lineno])
    return sorted(rows.values(), key=lambda r: r[3])


async def _ruff(args: list[str], code: str) -> subprocess.CompletedProcess[bytes]:
    from ruff.__main__ import find_ruff_bin

    try:
        with anyio.fail_after(RUFF_TIMEOUT):
            return await anyio.run_process([find_ruff_bin(), *args], input=code.encode(), check=False)
    except TimeoutError as exc:
        raise ToolError(f"ruff did not finish within {RUFF_TIMEOUT} s") from exc


def _requirements(text: str) -> dict[str, Any]:
    rows, options, invalid = [], [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append({"line": number, "option": line})
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            invalid.append({"line": number, "text": line, "error": str(exc)})
            continue
        pinned = len(req.specifier) == 1 and next(iter(req.specifier)).operator in ("==", "===")
        rows.append([req.name, str(req.specifier) or None, sorted(req.extras), str(req.marker) if req.marker else None,
                     req.url, pinned, number])  # fmt: skip
    return {"rows": rows, "options": options, "invalid": invalid}


def register(mcp: MCPServer, runner: Runner) -> None:  # noqa: C901 - one nested function per tool
    """Add the static analysis tools to ``mcp``."""

    @mcp.tool(annotations=PURE)
    async def python_syntax_check(code: Source) -> CallToolResult:
        """Check that Python code parses (compile only, nothing runs). Returns valid=true, or the line, column and
        message of the first syntax error with the offending line. Use it before running or saving generated code.
        """
        try:
            compile(code, "<code>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            return json_result({"valid": False, "line": exc.lineno, "column": exc.offset, "message": exc.msg,
                                "text": (exc.text or "").rstrip("\n")})  # fmt: skip
        return json_result({"valid": True, "lines": code.count("\n") + 1})

    @mcp.tool(annotations=PURE)
    async def python_ast_outline(code: Source) -> CallToolResult:
        """An outline of a Python module from its AST: classes (bases, methods), functions with signatures,
        decorators, docstring starts, line ranges and module-level variables. Use it to understand a large file
        without reading all of it.
        """
        return json_result({"outline": _outline(_parse(code))})

    @mcp.tool(annotations=PURE)
    async def python_imports(code: Source) -> CallToolResult:
        """The modules a piece of Python code imports, each classified as stdlib, third-party or relative, with the
        first line it appears on. Use it to find the packages code needs before running it.
        """
        rows = _imports(_parse(code))
        third = sorted({r[1] for r in rows if r[2] == "third-party"})
        return table_result(["module", "top_level", "kind", "line"], rows, title="imports", third_party=third)

    @mcp.tool(annotations=PURE)
    async def ruff_check(
        code: Source,
        select: Annotated[
            list[Annotated[str, Field(pattern=r"^[A-Z]{1,4}[0-9]{0,4}$")]] | None,
            Field(description="rule codes or prefixes, e.g. ['E', 'F', 'B', 'UP']; default: ruff's defaults"),
        ] = None,
        fix: Annotated[bool, Field(description="also return the code with safe fixes applied")] = False,
    ) -> CallToolResult:
        """Lint Python code with ruff: each finding with rule code, message, line/column and whether it is fixable;
        with fix=true also the fixed code. Use it to review generated code for bugs and style issues.
        """
        base = ["check", "--no-cache", "--isolated", "--exit-zero", "--stdin-filename", "snippet.py"]
        base += [f"--select={','.join(select)}"] if select else []
        result = await _ruff([*base, "--output-format", "json", "-"], code)
        if result.returncode != 0:
            raise ToolError(f"ruff failed: {result.stderr.decode(errors='replace')[:1000]}")
        findings = json.loads(result.stdout or b"[]")
        rows = [[f["code"], f["message"], f["location"]["row"], f["location"]["column"], f.get("fix") is not None]
                for f in findings]  # fmt: skip
        extra: dict[str, Any] = {}
        if fix:
            fixed = await _ruff([*base, "--fix-only", "-"], code)
            extra["fixed_code"] = fixed.stdout.decode()
        return table_result(["code", "message", "line", "column", "fixable"], rows, title="ruff findings", **extra)

    @mcp.tool(annotations=PURE)
    async def ruff_format(
        code: Source,
        line_length: Annotated[int, Field(ge=40, le=320)] = 88,
    ) -> CallToolResult:
        """Format Python code with ruff (Black-compatible style) and return the formatted code and whether anything
        changed. Fails with the parse error for code that does not parse.
        """
        result = await _ruff(["format", "--no-cache", "--isolated", f"--line-length={line_length}",
                              "--stdin-filename", "snippet.py", "-"], code)  # fmt: skip
        if result.returncode != 0:
            raise ToolError(f"ruff cannot format this code: {result.stderr.decode(errors='replace')[:1000]}")
        formatted = result.stdout.decode()
        return json_result({"changed": formatted != code, "code": formatted}, text=formatted)

    @mcp.tool(annotations=PURE)
    async def requirements_list(
        text: Annotated[str | None, Field(max_length=500_000, description="requirements.txt content")] = None,
        path: Annotated[str | None, Field(description="requirements file relative to the workspace")] = None,
    ) -> CallToolResult:
        """Parse a pip requirements file (text or a workspace file): each requirement's name, version specifier,
        extras, environment marker, URL, whether it is pinned (==), plus pip options (-r, -e, --index-url) and
        lines that are not valid requirements.
        """
        if (text is None) == (path is None):
            raise ToolError("give exactly one of text or path")
        if path is not None:
            root = runner.settings.workspace
            real = (root / path).resolve()
            if not real.is_relative_to(root) or not real.is_file():
                raise ToolError(f"{path!r} is not a file inside the workspace {root}")
            text = await anyio.Path(real).read_text(encoding="utf-8")
        assert text is not None
        parsed = _requirements(text)
        columns = ["name", "specifier", "extras", "marker", "url", "pinned", "line"]
        return table_result(columns, parsed["rows"], title="requirements", options=parsed["options"],
                            invalid=parsed["invalid"], source=str(Path(path)) if path else "text")  # fmt: skip
