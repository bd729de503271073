"""Linters: Dockerfile (hadolint + structure via dockerfile-parse), YAML (yamllint), shell (shellcheck), GitHub Actions
workflows (actionlint) and Docker Compose files (structural checks).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

import yaml
from dockerfile_parse import DockerfileParser
from mcp.server import MCPServer
from mcp_types import CallToolResult
from pydantic import Field
from yamllint import linter as yamllint_linter
from yamllint.config import YamlLintConfig, YamlLintConfigError

from servers._common import ToolError, json_result, table_result
from servers.devops._util import PURE, Content, FilePath, off_loop, read_source, run_tool, tool_binary

__all__ = ["compose_problems", "register"]

COMPOSE_TOP = {"version", "name", "services", "networks", "volumes", "configs", "secrets", "include"}
PORT = re.compile(
    r"^((\d{1,3}\.){3}\d{1,3}:|\[[0-9a-fA-F:]+\]:)?(\d{1,5}(-\d{1,5})?:)?\d{1,5}(-\d{1,5})?(/(tcp|udp))?$"
)
Shell = Literal["sh", "bash", "dash", "ksh"]


def _parse_dockerfile(text: str) -> dict[str, Any]:
    parser = DockerfileParser(fileobj=None)
    parser.content = text
    stages, current = [], None
    exposed: list[str] = []
    args: list[str] = []
    env_keys: list[str] = []
    for ins in parser.structure:
        name, value = ins["instruction"], ins["value"]
        if name == "FROM":
            parts = value.split()
            alias = parts[2] if len(parts) >= 3 and parts[1].lower() == "as" else None
            current = {"base": parts[0] if parts else "", "alias": alias, "line": ins["startline"] + 1, "steps": 0}
            stages.append(current)
        elif current is not None:
            current["steps"] += 1
        if name == "EXPOSE":
            exposed.extend(value.split())
        elif name == "ARG":
            args.append(value.split("=")[0])
        elif name == "ENV":
            env_keys.extend(k.split("=")[0] for k in re.split(r"\s+", value) if "=" in k)
    return {
        "stages": stages,
        "base_images": parser.parent_images,
        "final_user": next((i["value"] for i in reversed(parser.structure) if i["instruction"] == "USER"), None),
        "exposed_ports": exposed,
        "args": args,
        "env": env_keys,
        "entrypoint": next((i["value"] for i in reversed(parser.structure) if i["instruction"] == "ENTRYPOINT"), None),
        "cmd": next((i["value"] for i in reversed(parser.structure) if i["instruction"] == "CMD"), None),
        "instructions": len(parser.structure),
    }


def _yamllint(text: str, config: str | None) -> list[list[Any]]:
    try:
        conf = YamlLintConfig(config or "extends: default")
    except YamlLintConfigError as exc:
        raise ToolError(f"invalid yamllint config: {exc}") from exc
    return [[p.line, p.column, p.level, p.rule, p.desc] for p in yamllint_linter.run(text, conf)]


def _names(value: Any) -> list[str]:
    """Keys of a compose list-or-mapping field (depends_on, networks)."""
    return [str(v) for v in (value if isinstance(value, list) else list(value or []))]


def _service_problems(name: str, svc: dict[str, Any], services: dict[str, Any], top: dict[str, Any]) -> list[str]:
    problems = []
    declared_volumes = set(top.get("volumes") or {})
    declared_networks = set(top.get("networks") or {}) | {"default"}
    if "image" not in svc and "build" not in svc:
        problems.append(f"services.{name}: needs image or build")
    ports = [p for p in svc.get("ports") or [] if isinstance(p, str | int)]
    problems += [
        f"services.{name}.ports: {p!r} is not [host:]container[/proto]" for p in ports if not PORT.match(str(p))
    ]
    problems += [f"services.{name}.depends_on: unknown service {dep!r}"
                 for dep in _names(svc.get("depends_on")) if dep not in services]  # fmt: skip
    named = [v.split(":")[0] for v in svc.get("volumes") or [] if isinstance(v, str) and ":" in v]
    problems += [f"services.{name}.volumes: named volume {src!r} is not declared" for src in named
                 if src and not src.startswith((".", "/", "~", "$")) and src not in declared_volumes]  # fmt: skip
    problems += [f"services.{name}.networks: network {net!r} is not declared"
                 for net in _names(svc.get("networks")) if net not in declared_networks]  # fmt: skip
    env = svc.get("environment")
    if env is not None and not isinstance(env, list | dict):
        problems.append(f"services.{name}.environment: must be a list or a mapping")
    return problems


def _services_problems(services: dict[str, Any], top: dict[str, Any]) -> list[str]:
    problems = []
    for name, svc in services.items():
        if isinstance(svc, dict):
            problems += _service_problems(name, svc, services, top)
        else:
            problems.append(f"services.{name}: must be a mapping")
    return problems


def _cycle(services: dict[str, Any]) -> list[str] | None:
    graph = {}
    for name, svc in services.items():
        deps = (svc or {}).get("depends_on") or [] if isinstance(svc, dict) else []
        graph[name] = [d for d in (deps if isinstance(deps, list) else list(deps)) if d in services]
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in graph[node]:
            if state.get(dep) == 1:
                return [*path, node, dep]
            if dep not in state and (found := visit(dep, [*path, node])):
                return found
        state[node] = 2
        return None

    for node in graph:
        if node not in state and (found := visit(node, [])):
            return found
    return None


def compose_problems(text: str) -> tuple[dict[str, Any], list[str]]:
    """The parsed compose document and its structural problems."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ToolError(f"not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise ToolError("a compose file must be a YAML mapping with a services key")
    problems = [f"unknown top-level key {k!r}" for k in doc if k not in COMPOSE_TOP and not str(k).startswith("x-")]
    services = doc.get("services")
    if not isinstance(services, dict) or not services:
        problems.append("services: must be a non-empty mapping")
        return doc, problems
    problems += _services_problems(services, doc)
    if cycle := _cycle(services):
        problems.append("depends_on cycle: " + " -> ".join(cycle))
    return doc, problems


def register(mcp: MCPServer) -> None:
    """Add the linters to ``mcp``."""

    @mcp.tool(annotations=PURE)
    async def dockerfile_lint(
        content: Content = None,
        path: FilePath = None,
        ignore: Annotated[
            list[Annotated[str, Field(pattern=r"^(DL|SC)\d{4}$")]] | None, Field(description="rules")
        ] = None,
    ) -> CallToolResult:
        """Lint a Dockerfile with hadolint (best practices such as pinned versions, apt cleanup, USER, and shellcheck
        on RUN lines). Returns each finding with line, rule code (DLxxxx/SCxxxx), level and message.
        """
        text, label = await off_loop(read_source, content, path)
        argv = [tool_binary("hadolint"), "--no-color", "--format", "json", "--no-fail"]
        argv += [arg for rule in ignore or [] for arg in ("--ignore", rule)]
        result = await run_tool([*argv, "-"], stdin=text)
        try:
            findings = json.loads(result.stdout or b"[]")
        except json.JSONDecodeError as exc:
            raise ToolError(f"hadolint failed: {result.stderr.decode(errors='replace')[:500]}") from exc
        rows = [[f["line"], f["code"], f["level"], f["message"]] for f in findings]
        return table_result(["line", "code", "level", "message"], rows, title=f"hadolint {label}")

    @mcp.tool(annotations=PURE)
    async def dockerfile_parse(content: Content = None, path: FilePath = None) -> CallToolResult:
        """Summarise a Dockerfile's structure: build stages (base image, alias, line, step count), base images, final
        USER, EXPOSEd ports, ARGs, ENV keys, ENTRYPOINT and CMD. Use it to review an image without building it.
        """
        text, _ = await off_loop(read_source, content, path)
        summary = await off_loop(_parse_dockerfile, text)
        if not summary["stages"]:
            raise ToolError("no FROM instruction: this is not a Dockerfile")
        return json_result(summary)

    @mcp.tool(annotations=PURE)
    async def yaml_lint(
        content: Content = None,
        path: FilePath = None,
        config: Annotated[str | None, Field(max_length=20_000, description="yamllint config YAML")] = None,
    ) -> CallToolResult:
        """Lint YAML with yamllint (syntax errors, duplicate keys, indentation, truthy values, line length...). The
        default config is yamllint's ``default``; pass e.g. ``extends: relaxed``. Returns line, column, level, rule.
        """
        text, label = await off_loop(read_source, content, path)
        rows = await off_loop(_yamllint, text, config)
        errors = sum(1 for r in rows if r[2] == "error")
        return table_result(["line", "column", "level", "rule", "message"], rows, title=f"yamllint {label}",
                            errors=errors)  # fmt: skip

    @mcp.tool(annotations=PURE)
    async def shell_lint(
        content: Content = None,
        path: FilePath = None,
        shell: Annotated[Shell | None, Field(description="dialect when the script has no shebang")] = None,
        severity: Literal["error", "warning", "info", "style"] = "style",
    ) -> CallToolResult:
        """Lint a shell script with shellcheck: quoting bugs, unset variables, useless cats, portability issues.
        Returns line, column, SC code, level, message and whether a fix is suggested.
        """
        text, label = await off_loop(read_source, content, path)
        argv = [tool_binary("shellcheck"), "--format=json1", f"--severity={severity}"]
        argv += [f"--shell={shell}"] if shell else []
        result = await run_tool([*argv, "-"], stdin=text)
        try:
            comments = json.loads(result.stdout)["comments"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise ToolError(f"shellcheck failed: {result.stderr.decode(errors='replace')[:500]}") from exc
        rows = [[c["line"], c["column"], f"SC{c['code']}", c["level"], c["message"], c.get("fix") is not None]
                for c in comments]  # fmt: skip
        return table_result(
            ["line", "column", "code", "level", "message", "fixable"], rows, title=f"shellcheck {label}"
        )

    @mcp.tool(annotations=PURE)
    async def actions_lint(content: Content = None, path: FilePath = None) -> CallToolResult:
        """Lint a GitHub Actions workflow with actionlint: schema errors, bad `needs`, unknown inputs, expression
        type errors and (via shellcheck) bugs in `run:` scripts. Returns line, column, kind and message.
        """
        text, label = await off_loop(read_source, content, path)
        result = await run_tool([tool_binary("actionlint"), "-no-color", "-format", "{{json .}}", "-"], stdin=text)
        try:
            findings = json.loads(result.stdout or b"[]")
        except json.JSONDecodeError as exc:
            raise ToolError(f"actionlint failed: {result.stderr.decode(errors='replace')[:500]}") from exc
        rows = [[f["line"], f["column"], f["kind"], f["message"]] for f in findings or []]
        return table_result(["line", "column", "kind", "message"], rows, title=f"actionlint {label}")

    @mcp.tool(annotations=PURE)
    async def compose_validate(content: Content = None, path: FilePath = None) -> CallToolResult:
        """Validate a Docker Compose file: YAML syntax, known top-level keys, every service has image or build, port
        syntax, depends_on targets exist and have no cycle, named volumes and networks are declared. Returns
        valid, the problems, and per service its image, ports and dependencies.
        """
        text, _ = await off_loop(read_source, content, path)
        doc, problems = await off_loop(compose_problems, text)
        found = doc.get("services")
        services: dict[str, Any] = found if isinstance(found, dict) else {}
        summary = {
            name: {"image": svc.get("image"), "build": svc.get("build") is not None, "ports": svc.get("ports", []),
                   "depends_on": list(svc.get("depends_on") or [])}
            for name, svc in services.items() if isinstance(svc, dict)
        }  # fmt: skip
        return json_result({"valid": not problems, "problems": problems, "services": summary})
