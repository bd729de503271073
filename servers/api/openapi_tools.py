"""OpenAPI tools: load and validate a spec, browse operations, schemas and security schemes, validate requests and
responses against it, and call an operation by its operationId."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import quote

import anyio
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.api import net
from servers.api import openapi_doc as oa
from servers.api.net import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, Headers
from servers.api.net import Timeout as TimeoutArg
from servers.api.spec_source import Source, base_of, load_document

READ_LOCAL = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)
CALL = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)

OperationId = Annotated[str | None, Field(description="the operation's operationId (or 'GET /path')")]
MethodArg = Annotated[
    Literal["get", "put", "post", "delete", "options", "head", "patch", "trace"] | None,
    Field(description="HTTP method (with path, instead of operation_id)"),
]
PathTemplate = Annotated[str | None, Field(description="path template as in the spec, e.g. /pets/{id}")]
ConcretePath = Annotated[str, Field(pattern=r"^/", description="the request path with values, e.g. /pets/7")]
Params = Annotated[dict[str, Any] | None, Field(description="parameter values by name")]


async def _doc(spec: str) -> dict[str, Any]:
    return oa.require_document(await load_document(spec))


def _concrete_path(template: str, values: dict[str, Any]) -> str:
    missing = [n for n in re.findall(r"{([^}]+)}", template) if n not in values]
    if missing:
        raise ToolError(f"path parameters missing: {missing}")
    return re.sub(r"{([^}]+)}", lambda m: quote(str(values[m.group(1)]), safe=""), template)


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the OpenAPI tools to ``mcp``."""

    @mcp.tool(
        annotations=READ,
        description="Load an OpenAPI (3.x or Swagger 2.0) spec from a URL, file or inline JSON/YAML and summarise "
        "it: title, version, servers, tags and counts of paths, operations and schemas, plus whether it validates. "
        "Use first when working with a REST API that publishes a spec; later openapi_* calls reuse the cache.",
    )
    async def openapi_load(spec: Source, refresh: bool = False) -> CallToolResult:
        doc = oa.require_document(await load_document(spec, refresh=refresh))
        ops = list(oa.operations(doc))
        errors = await anyio.to_thread.run_sync(oa.spec_errors, doc)
        info = doc.get("info") or {}
        return json_result({
            "title": info.get("title"), "version": info.get("version"), "description": info.get("description"),
            "openapi": doc.get("openapi") or doc.get("swagger"),
            "servers": [s.get("url") for s in doc.get("servers") or []],
            "tags": sorted({t for o in ops for t in o.spec.get("tags", [])}),
            "paths": len(doc.get("paths") or {}), "operations": len(ops),
            "schemas": len((doc.get("components") or {}).get("schemas") or doc.get("definitions") or {}),
            "valid": not errors, "errorCount": len(errors),
        })  # fmt: skip

    @mcp.tool(
        annotations=READ,
        description="Validate an OpenAPI document against the OpenAPI 2.0/3.0/3.1 specification "
        "(openapi-spec-validator): structure, required fields, $refs. Returns valid and each error with its path.",
    )
    async def openapi_validate_spec(spec: Source) -> CallToolResult:
        doc = await load_document(spec)
        if not isinstance(doc, dict):
            return json_result({"valid": False, "errors": [{"message": "the document is not a mapping", "path": ""}]})
        errors = await anyio.to_thread.run_sync(oa.spec_errors, doc)
        return json_result({"valid": not errors, "errors": errors})

    @mcp.tool(
        annotations=READ,
        description="List the operations of an OpenAPI spec as a table: operationId, method, path, summary, tags. "
        "Filter by tag or by path prefix. Use to find the operation to describe or call.",
    )
    async def openapi_list_operations(
        spec: Source,
        tag: Annotated[str | None, Field(description="only operations with this tag")] = None,
        path_prefix: Annotated[str | None, Field(description="only paths starting with this")] = None,
    ) -> CallToolResult:
        doc = await _doc(spec)
        rows = [
            [o.operation_id, o.method.upper(), o.path, o.spec.get("summary", ""), ",".join(o.spec.get("tags", []))]
            for o in oa.operations(doc)
            if (not tag or tag in o.spec.get("tags", [])) and (not path_prefix or o.path.startswith(path_prefix))
        ]
        return table_result(["operationId", "method", "path", "summary", "tags"], rows)

    @mcp.tool(
        annotations=READ,
        description="Describe one OpenAPI operation with $refs resolved: parameters (name, in, required, schema), "
        "request body schema per media type, responses per status, and the security it needs. Use before calling it.",
    )
    async def openapi_describe_operation(
        spec: Source, operation_id: OperationId = None, method: MethodArg = None, path: PathTemplate = None
    ) -> CallToolResult:
        doc = await _doc(spec)
        op = oa.find_operation(doc, operation_id, method, path)
        body = oa.deref(doc, op.spec.get("requestBody")) if op.spec.get("requestBody") else None
        return json_result({
            "operationId": op.operation_id, "method": op.method.upper(), "path": op.path,
            "summary": op.spec.get("summary"), "description": op.spec.get("description"),
            "parameters": [
                {"name": p.get("name"), "in": p.get("in"), "required": bool(p.get("required")),
                 "schema": oa.deref(doc, p.get("schema", {})), "description": p.get("description")}
                for p in op.parameters
            ],
            "requestBody": body,
            "responses": oa.deref(doc, op.spec.get("responses") or {}),
            "security": op.spec.get("security", doc.get("security", [])),
        })  # fmt: skip

    @mcp.tool(
        annotations=READ,
        description="List the component schemas (data models) of an OpenAPI spec: name, type, property count, "
        "required properties, description.",
    )
    async def openapi_list_schemas(spec: Source) -> CallToolResult:
        doc = await _doc(spec)
        schemas = (doc.get("components") or {}).get("schemas") or doc.get("definitions") or {}
        rows = []
        for name, schema in sorted(schemas.items()):
            schema = oa.deref(doc, schema, 1)
            rows.append([name, schema.get("type", ""), len(schema.get("properties") or {}),
                         ",".join(schema.get("required") or []), (schema.get("description") or "")[:120]])  # fmt: skip
        return table_result(["name", "type", "properties", "required", "description"], rows)

    @mcp.tool(
        annotations=READ,
        description="Return one component schema of an OpenAPI spec with its $refs resolved (to depth levels), "
        "e.g. to build a valid request body.",
    )
    async def openapi_get_schema(
        spec: Source,
        name: Annotated[str, Field(min_length=1, description="schema name under components/schemas")],
        depth: Annotated[int, Field(ge=0, le=oa.MAX_REF_DEPTH, description="levels of $ref inlined")] = 5,
    ) -> CallToolResult:
        doc = await _doc(spec)
        schemas = (doc.get("components") or {}).get("schemas") or doc.get("definitions") or {}
        if name not in schemas:
            raise ToolError(f"no schema {name!r}; schemas: {sorted(schemas)[:50]}")
        return json_result({"name": name, "schema": oa.deref(doc, schemas[name], depth)})

    @mcp.tool(
        annotations=READ,
        description="List the security schemes of an OpenAPI spec (type, scheme, where an API key goes, OAuth2 "
        "flows with token URLs and scopes) and the global security requirements. Use to know which credentials "
        "an API needs and how to send them.",
    )
    async def openapi_security_schemes(spec: Source) -> CallToolResult:
        doc = await _doc(spec)
        schemes = (doc.get("components") or {}).get("securitySchemes") or doc.get("securityDefinitions") or {}
        rows = []
        for name, s in sorted(schemes.items()):
            s = oa.deref(doc, s, 2)
            flows = s.get("flows") or {}
            detail = (
                f"{s.get('in')}:{s.get('name')}" if s.get("type") == "apiKey"
                else ";".join(f"{f}:{v.get('tokenUrl') or v.get('authorizationUrl', '')} scopes="
                              f"{','.join(v.get('scopes', {}))}" for f, v in flows.items())
                if flows else s.get("bearerFormat") or s.get("openIdConnectUrl") or ""
            )  # fmt: skip
            rows.append([name, s.get("type", ""), s.get("scheme", ""), detail, s.get("description") or ""])
        return table_result(["name", "type", "scheme", "detail", "description"], rows, security=doc.get("security", []))

    @mcp.tool(
        annotations=READ_LOCAL,
        description="Check a request against an OpenAPI spec without sending it: method, concrete path, query, "
        "headers and JSON body are validated (types, required parameters, body schema). Returns valid, the "
        "matched operation and each error with details.",
    )
    async def openapi_validate_request(
        spec: Source,
        method: Literal["get", "put", "post", "delete", "options", "head", "patch", "trace"],
        path: ConcretePath,
        query: Params = None,
        headers: Headers = None,
        body: Annotated[Any, Field(description="the JSON body")] = None,
        base_url: Annotated[str | None, Field(description="server base URL; default: the spec's first")] = None,
    ) -> CallToolResult:
        doc = await _doc(spec)
        api = await anyio.to_thread.run_sync(oa.core, doc)
        base = oa.server_url(doc, base_of(spec), base_url)
        request = oa.mock_request(base, method, path, query, headers, body)
        errors = await anyio.to_thread.run_sync(oa.request_errors, api, request)
        return json_result({"valid": not errors, "errors": errors})

    @mcp.tool(
        annotations=READ_LOCAL,
        description="Check a response against an OpenAPI spec: for the request method and path, is the status "
        "documented and does the body match its schema? Returns valid and each error with the failing JSON path.",
    )
    async def openapi_validate_response(
        spec: Source,
        method: Literal["get", "put", "post", "delete", "options", "head", "patch", "trace"],
        path: ConcretePath,
        status: Annotated[int, Field(ge=100, le=599)],
        body: Annotated[Any, Field(description="the response JSON body")] = None,
        content_type: str = "application/json",
        headers: Headers = None,
        base_url: Annotated[str | None, Field(description="server base URL; default: the spec's first")] = None,
    ) -> CallToolResult:
        doc = await _doc(spec)
        api = await anyio.to_thread.run_sync(oa.core, doc)
        request = oa.mock_request(oa.server_url(doc, base_of(spec), base_url), method, path, None, None, None)
        raw = b"" if body is None else net.json_bytes(body)
        errors = await anyio.to_thread.run_sync(
            oa.response_errors, api, request, status, raw, content_type, headers or {}
        )
        return json_result({"valid": not errors, "errors": errors})

    @mcp.tool(
        annotations=CALL,
        description="Call an OpenAPI operation by operationId: fills path parameters, adds query and headers, sends "
        "the JSON body to the spec's server (or base_url), then validates the response against the spec. "
        "With validate_request the request is checked first and refused when it does not match.",
    )
    async def openapi_call(
        spec: Source,
        operation_id: Annotated[str, Field(min_length=1, description="operationId to call")],
        path_params: Params = None,
        query: Params = None,
        headers: Headers = None,
        body: Annotated[Any, Field(description="the JSON request body")] = None,
        base_url: Annotated[str | None, Field(description="server base URL; default: the spec's first")] = None,
        validate_request: bool = True,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        doc = await _doc(spec)
        op = oa.find_operation(doc, operation_id, None, None)
        path = _concrete_path(op.path, path_params or {})
        base = oa.server_url(doc, base_of(spec), base_url)
        api = await anyio.to_thread.run_sync(oa.core, doc)
        request = oa.mock_request(base, op.method, path, query, headers, body)
        if validate_request:
            errors = await anyio.to_thread.run_sync(oa.request_errors, api, request)
            if errors:
                raise ToolError(f"the request does not match {operation_id}: {errors}")
        async with net.client(timeout) as http:
            kwargs = net.request_kwargs(headers, query, body)
            fetched = await net.fetch(http, op.method.upper(), base + path, max_bytes=DEFAULT_MAX_BYTES, **kwargs)
        response_problems = await anyio.to_thread.run_sync(
            oa.response_errors, api, request, fetched.status, fetched.body, fetched.content_type,
            dict(fetched.response.headers),
        )  # fmt: skip
        out = fetched.summary()
        out.update(operationId=op.operation_id, responseValid=not response_problems, responseErrors=response_problems)
        return json_result(out)
