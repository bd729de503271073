"""Config file checks: .env files, TOML, INI, JSON Schema, systemd units, and HCL/Terraform (python-hcl2)."""

from __future__ import annotations

import configparser
import io
import json
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any

import hcl2
import jsonschema
import yaml
from dotenv import dotenv_values
from lark.exceptions import LarkError
from mcp.server import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.devops._util import PURE, Content, FilePath, inside_workspace, off_loop, read_source
from servers.devops.systemd import unit_problems

__all__ = ["register"]

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET = re.compile(r"(?i)(secret|token|passw|key|credential|auth|private)")


def _env_file(text: str, required: list[str]) -> dict[str, Any]:
    problems: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep:
            problems.append({"line": number, "problem": f"no '=' in {raw.strip()[:60]!r}"})
            continue
        if not ENV_NAME.match(name):
            problems.append({"line": number, "problem": f"invalid variable name {name!r}"})
        if name in seen:
            problems.append({"line": number, "problem": f"{name} already set on line {seen[name]}"})
        seen.setdefault(name, number)
        value = value.strip()
        if not value:
            problems.append({"line": number, "problem": f"{name} is empty"})
        elif value[0] not in "'\"" and " " in value.split(" #")[0]:
            problems.append({"line": number, "problem": f"{name}: unquoted value with spaces"})
        elif value[0] in "'\"" and not value.rstrip().split(" #")[0].endswith(value[0]):
            problems.append({"line": number, "problem": f"{name}: unterminated quote"})
    values = dotenv_values(stream=io.StringIO(text), interpolate=True)
    missing = [k for k in required if not values.get(k)]
    shown = {k: ("<redacted>" if SECRET.search(k) else v) for k, v in values.items()}
    return {"valid": not problems and not missing, "problems": problems, "missing": missing, "variables": shown}


def _toml(text: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return {"valid": False, "error": str(exc)}
    tables = sorted(k for k, v in data.items() if isinstance(v, dict))
    return {"valid": True, "keys": sorted(data), "tables": tables, "data": data}


def _ini(text: str) -> dict[str, Any]:
    parser = configparser.ConfigParser(strict=True, interpolation=configparser.BasicInterpolation())
    try:
        parser.read_string(text)
        sections = {s: dict(parser.items(s)) for s in parser.sections()}
    except configparser.Error as exc:
        return {"valid": False, "error": str(exc).replace("\n", " ")}
    return {"valid": True, "sections": sections, "defaults": dict(parser.defaults())}


def _load_any(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ToolError(f"the {what} is neither JSON nor YAML: {exc}") from exc


def _schema_errors(document: str, schema: str) -> list[list[Any]]:
    schema_obj = _load_any(schema, "schema")
    if not isinstance(schema_obj, dict):
        raise ToolError("the schema must be a JSON object")
    cls = jsonschema.validators.validator_for(schema_obj)
    try:
        cls.check_schema(schema_obj)
    except jsonschema.SchemaError as exc:
        raise ToolError(f"invalid JSON Schema: {exc.message}") from exc
    validator = cls(schema_obj, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(_load_any(document, "document")), key=lambda e: list(e.absolute_path))
    return [["/" + "/".join(str(p) for p in e.absolute_path), e.validator, e.message[:500]] for e in errors[:200]]


def _unquote(value: Any) -> Any:
    if isinstance(value, dict):
        return {_unquote(k): _unquote(v) for k, v in value.items() if k != "__is_block__"}
    if isinstance(value, list):
        return [_unquote(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _hcl(text: str) -> dict[str, Any]:
    try:
        return dict(_unquote(hcl2.loads(text)))
    except (LarkError, ValueError) as exc:
        raise ToolError(f"HCL parse error: {str(exc).splitlines()[0]}") from exc


def _tf_sources(content: str | None, path: str | None) -> str:
    if path is not None and content is None:
        real = inside_workspace(path, kind="any")
        if real.is_dir():
            files = sorted(real.glob("*.tf"))
            if not files:
                raise ToolError(f"no .tf files in {path!r}")
            return "\n".join(f.read_text(encoding="utf-8") for f in files)
    return read_source(content, path)[0]


def _inventory(data: dict[str, Any]) -> dict[str, Any]:
    def blocks(key: str, depth: int) -> list[tuple[list[str], dict[str, Any]]]:
        found: list[tuple[list[str], dict[str, Any]]] = []
        for block in data.get(key, []):
            stack: list[tuple[list[str], Any]] = [([], block)]
            while stack:
                labels, node = stack.pop()
                if len(labels) == depth:
                    found.append((labels, node if isinstance(node, dict) else {}))
                elif isinstance(node, dict):
                    stack.extend(([*labels, k], v) for k, v in node.items())
        return found

    required: dict[str, Any] = {}
    for tf in data.get("terraform", []):
        for req in tf.get("required_providers", []):
            required.update(req)
    return {
        "resources": sorted(".".join(labels) for labels, _ in blocks("resource", 2)),
        "data_sources": sorted("data." + ".".join(labels) for labels, _ in blocks("data", 2)),
        "modules": {labels[0]: body.get("source") for labels, body in blocks("module", 1)},
        "variables": {labels[0]: {"type": body.get("type"), "default": body.get("default"),
                                  "required": "default" not in body} for labels, body in blocks("variable", 1)},
        "outputs": sorted(labels[0] for labels, _ in blocks("output", 1)),
        "providers": sorted({labels[0] for labels, _ in blocks("provider", 1)}),
        "required_providers": required,
    }  # fmt: skip


def register(mcp: MCPServer) -> None:
    """Add the config file tools to ``mcp``."""

    @mcp.tool(annotations=PURE)
    async def env_file_validate(
        content: Content = None,
        path: FilePath = None,
        required: Annotated[list[str] | None, Field(max_length=500, description="variables that must be set")] = None,
    ) -> CallToolResult:
        """Check a .env file: lines without '=', invalid names, duplicates, empty values, unquoted spaces,
        unterminated quotes, and required variables that are missing. Returns the parsed variables (secret-looking
        values redacted) and the problems with line numbers.
        """
        text, _ = await off_loop(read_source, content, path)
        return json_result(await off_loop(_env_file, text, required or []))

    @mcp.tool(annotations=PURE)
    async def toml_validate(content: Content = None, path: FilePath = None) -> CallToolResult:
        """Parse TOML (pyproject.toml, Cargo.toml, config.toml) and return valid, the top-level keys and tables and
        the parsed data, or the error with its line and column.
        """
        text, _ = await off_loop(read_source, content, path)
        return json_result(await off_loop(_toml, text))

    @mcp.tool(annotations=PURE)
    async def ini_validate(content: Content = None, path: FilePath = None) -> CallToolResult:
        """Parse an INI file (setup.cfg, tox.ini, .gitconfig-style) strictly: duplicate sections or keys, missing
        section headers and bad %(interpolation)s are errors. Returns the sections with their resolved values.
        """
        text, _ = await off_loop(read_source, content, path)
        return json_result(await off_loop(_ini, text))

    @mcp.tool(annotations=PURE)
    async def json_schema_validate(
        document: Annotated[str, Field(min_length=1, max_length=2_000_000, description="JSON or YAML document")],
        schema: Annotated[str, Field(min_length=2, max_length=1_000_000, description="JSON Schema (JSON or YAML)")],
    ) -> CallToolResult:
        """Validate a JSON or YAML document against a JSON Schema (draft 4 to 2020-12, chosen by $schema, formats
        checked). Returns valid and every error with its JSON pointer, the failing keyword and the message.
        """
        rows = await off_loop(_schema_errors, document, schema)
        return table_result(["pointer", "keyword", "message"], rows, title="schema errors", valid=not rows)

    @mcp.tool(annotations=PURE)
    async def systemd_unit_validate(
        content: Content = None,
        path: FilePath = None,
        unit_type: Annotated[
            str | None,
            Field(
                pattern=r"^(service|timer|socket|mount|path|target)$",
                description="default: from the file name or the sections",
            ),
        ] = None,
    ) -> CallToolResult:
        """Check a systemd unit file: section and key names (typos such as ExecStar), value syntax (booleans, time
        spans, Type=, Restart=), required keys (ExecStart with an absolute path, a timer's OnCalendar/OnBootSec...)
        and an [Install] WantedBy. Returns valid, errors, warnings and the parsed sections.
        """
        text, label = await off_loop(read_source, content, path)
        kind = unit_type or (Path(label).suffix.lstrip(".") if path else None)
        return json_result(await off_loop(unit_problems, text, kind))

    @mcp.tool(annotations=PURE)
    async def hcl_parse(content: Content = None, path: FilePath = None) -> CallToolResult:
        """Parse HCL2 (Terraform, Packer, Nomad files) into JSON (blocks as nested objects, expressions as
        ``${...}`` strings), or return the parse error with its line and column.
        """
        text, _ = await off_loop(read_source, content, path)
        return json_result({"data": await off_loop(_hcl, text)})

    @mcp.tool(annotations=PURE)
    async def terraform_inventory(
        content: Content = None,
        path: Annotated[str | None, Field(max_length=1000, description="a .tf file or a module folder")] = None,
    ) -> CallToolResult:
        """Inventory a Terraform module (one .tf text, a .tf file or every .tf in a folder): resources, data sources,
        modules with their sources, variables (type, default, required), outputs, providers and required provider
        versions. Use it to understand infrastructure code before planning a change.
        """
        text = await off_loop(_tf_sources, content, path)
        return json_result(_inventory(await off_loop(_hcl, text)))
