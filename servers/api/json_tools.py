"""JSON tools: query (JMESPath, jq), validate against a JSON Schema, diff, convert JSON/YAML/TOML, flatten and
unflatten nested documents, and infer a schema from examples. All local: nothing leaves the machine."""

from __future__ import annotations

import itertools
import json
import tomllib
from typing import Annotated, Any, Literal

import jmespath
import jmespath.exceptions
import jq
import jsonschema
import jsonschema.exceptions
import yaml
from deepdiff import DeepDiff
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result

LOCAL = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
MAX_ERRORS = 100

Data = Annotated[Any, Field(description="a JSON value (object, array or scalar)")]
Separator = Annotated[str, Field(min_length=1, max_length=3, description="joins nested keys, e.g. '.' or '/'")]


def _flatten(value: Any, prefix: str, sep: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            _flatten(inner, f"{prefix}{sep}{key}" if prefix else str(key), sep, out)
    elif isinstance(value, list) and value:
        for index, inner in enumerate(value):
            _flatten(inner, f"{prefix}{sep}{index}" if prefix else str(index), sep, out)
    else:
        out[prefix] = value


def _unflatten(flat: dict[str, Any], sep: str) -> Any:
    root: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(sep)
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ToolError(f"key {key!r} nests under {part!r}, which already holds a value")
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise ToolError(f"key {key!r} collides with a nested object")
        node[parts[-1]] = value
    return _lists(root)


def _lists(node: Any) -> Any:
    """Objects whose keys are exactly 0..n-1 become arrays again."""
    if not isinstance(node, dict):
        return node
    node = {k: _lists(v) for k, v in node.items()}
    if node and all(k.isdigit() for k in node) and sorted(int(k) for k in node) == list(range(len(node))):
        return [node[str(i)] for i in range(len(node))]
    return node


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}[type(value)]


def infer(values: list[Any]) -> dict[str, Any]:
    """A JSON Schema that every value in ``values`` satisfies (required = keys present in every object)."""
    types = sorted({_type_of(v) for v in values})
    if "integer" in types and "number" in types:
        types.remove("integer")
    schema: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
    objects = [v for v in values if isinstance(v, dict)]
    if objects:
        keys = list(dict.fromkeys(k for o in objects for k in o))
        schema["properties"] = {k: infer([o[k] for o in objects if k in o]) for k in keys}
        required = [k for k in keys if all(k in o for o in objects)]
        if required:
            schema["required"] = required
    arrays = [item for v in values if isinstance(v, list) for item in v]
    if arrays:
        schema["items"] = infer(arrays)
    return schema


def _parse(text: str, fmt: str) -> Any:
    try:
        if fmt == "json":
            return json.loads(text)
        if fmt == "yaml":
            docs = list(yaml.safe_load_all(text))
            return docs[0] if len(docs) == 1 else docs
        return tomllib.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ToolError(f"the text is not valid {fmt}: {exc}") from exc


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the JSON tools to ``mcp``."""

    @mcp.tool(
        annotations=LOCAL,
        description="Query a JSON value with a JMESPath expression (e.g. 'items[?price > `10`].name'). Use to pick "
        "fields out of an API response. Returns the result value.",
    )
    async def json_query(
        data: Data, expression: Annotated[str, Field(min_length=1, description="JMESPath expression")]
    ) -> CallToolResult:
        try:
            return json_result({"result": jmespath.search(expression, data)})
        except jmespath.exceptions.JMESPathError as exc:
            raise ToolError(f"bad JMESPath expression: {exc}") from exc

    @mcp.tool(
        annotations=LOCAL,
        description="Run a jq program over a JSON value (e.g. '.items | map(select(.ok)) | length') and return all "
        "outputs. Use for transformations JMESPath cannot express (reduce, group_by, string formatting).",
    )
    async def json_jq(
        data: Data,
        program: Annotated[str, Field(min_length=1, description="jq program")],
        max_outputs: Annotated[int, Field(ge=1, le=100_000)] = 1000,
    ) -> CallToolResult:
        try:
            compiled = jq.compile(program)
        except ValueError as exc:
            raise ToolError(f"jq program does not compile: {exc}") from exc
        try:
            outputs = list(itertools.islice(compiled.input_value(data), max_outputs))
        except ValueError as exc:
            raise ToolError(f"jq failed on this input: {exc}") from exc
        return json_result({"outputs": outputs, "count": len(outputs)})

    @mcp.tool(
        annotations=LOCAL,
        description="Validate a JSON value against a JSON Schema (draft picked from $schema, default 2020-12). "
        "Returns valid and every error with its JSON path and failing keyword. Use to check payloads or configs.",
    )
    async def json_validate(
        data: Data, schema: Annotated[dict[str, Any], Field(description="the JSON Schema")]
    ) -> CallToolResult:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise ToolError(f"the schema itself is invalid: {exc.message}") from exc
        errors = []
        for error in sorted(cls(schema).iter_errors(data), key=lambda e: list(e.absolute_path)):
            errors.append({"path": "/" + "/".join(str(p) for p in error.absolute_path), "message": error.message,
                           "keyword": error.validator})  # fmt: skip
            if len(errors) >= MAX_ERRORS:
                break
        return json_result({"valid": not errors, "errors": errors, "draft": cls.__name__})

    @mcp.tool(
        annotations=LOCAL,
        description="Compare two JSON values (DeepDiff) and list what changed: values changed, keys or items "
        "added and removed, type changes. ignore_order treats arrays as sets. Use to compare API responses.",
    )
    async def json_diff(
        before: Data, after: Data, ignore_order: bool = False,
        exclude_paths: Annotated[list[str] | None, Field(description="paths to skip, e.g. root['updated_at']")] = None,
    ) -> CallToolResult:  # fmt: skip
        diff = DeepDiff(before, after, ignore_order=ignore_order, exclude_paths=exclude_paths or None, view="tree")
        changes = [
            {"kind": kind, "path": item.path(), "before": _plain(item.t1), "after": _plain(item.t2)}
            for kind, items in diff.items()
            for item in items
        ]
        return json_result({"equal": not changes, "changes": changes, "count": len(changes)})

    @mcp.tool(
        annotations=LOCAL,
        description="Convert structured text between formats: JSON, YAML or TOML in, JSON or YAML out. Returns the "
        "converted text and the parsed value. Use to read a YAML/TOML config as JSON or to write YAML.",
    )
    async def json_convert(
        text: Annotated[str, Field(min_length=1, description="the source text")],
        source: Literal["json", "yaml", "toml"],
        target: Literal["json", "yaml"],
        indent: Annotated[int, Field(ge=0, le=8)] = 2,
    ) -> CallToolResult:
        value = _parse(text, source)
        output = (json.dumps(value, indent=indent or None, ensure_ascii=False, default=str) if target == "json"
                  else yaml.safe_dump(value, sort_keys=False, allow_unicode=True, indent=max(indent, 2)))  # fmt: skip
        return json_result({"text": output, "value": json.loads(json.dumps(value, default=str))}, text=output)

    @mcp.tool(
        annotations=LOCAL,
        description="Flatten nested JSON into one level of joined keys ({'a': {'b': [1]}} → {'a.b.0': 1}). Use to "
        "turn a document into key/value rows or to compare leaves.",
    )
    async def json_flatten(data: Data, separator: Separator = ".") -> CallToolResult:
        out: dict[str, Any] = {}
        _flatten(data, "", separator, out)
        return json_result({"flat": out, "count": len(out)})

    @mcp.tool(
        annotations=LOCAL,
        description="Rebuild nested JSON from flat joined keys ({'a.b.0': 1} → {'a': {'b': [1]}}); keys that are "
        "0..n-1 become arrays. The inverse of json_flatten.",
    )
    async def json_unflatten(
        flat: Annotated[dict[str, Any], Field(description="flat object of joined keys")], separator: Separator = "."
    ) -> CallToolResult:
        return json_result({"data": _unflatten(flat, separator)})

    @mcp.tool(
        annotations=LOCAL,
        description="Infer a JSON Schema from one or more example values (types, properties, required keys, array "
        "items). Use to document an undocumented API response or to seed json_validate.",
    )
    async def json_infer_schema(
        examples: Annotated[list[Any], Field(min_length=1, max_length=10_000, description="example JSON values")],
    ) -> CallToolResult:
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **infer(examples)}
        return json_result({"schema": schema})


def _plain(value: Any) -> Any:
    """DeepDiff marks a missing side with a sentinel; show it as null."""
    return value if isinstance(value, str | int | float | bool | list | dict | type(None)) else None
