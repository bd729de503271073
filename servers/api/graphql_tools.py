"""GraphQL tools: introspect a live endpoint (schema cached per URL), browse types, build and validate documents
locally with graphql-core, then run queries and mutations over HTTP (POST application/json)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import graphql
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.api import net
from servers.api.net import DEFAULT_TIMEOUT, Headers, Url
from servers.api.net import Timeout as TimeoutArg

READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)
SCHEMA_CACHE_SECONDS = 120.0

Document = Annotated[str, Field(min_length=1, description="a GraphQL document (query text)")]
Variables = Annotated[dict[str, Any] | None, Field(description="values of the document's $variables")]

_schemas: dict[str, tuple[float, graphql.GraphQLSchema]] = {}


async def _post(url: str, payload: dict[str, Any], headers: dict[str, str] | None, timeout: float) -> Any:
    async with net.client(timeout) as http:
        fetched = await net.fetch(http, "POST", url, json=payload, headers=headers or {}, max_bytes=20_000_000)
    if fetched.status >= 500 or (fetched.status >= 400 and "json" not in fetched.content_type):
        raise ToolError(f"GraphQL endpoint {url} answered {fetched.status}: {fetched.text()[:300]}")
    body = fetched.json()
    if not isinstance(body, dict):
        raise ToolError(f"{url} did not answer a GraphQL response object")
    return body


async def schema_of(url: str, headers: dict[str, str] | None, *, refresh: bool = False) -> graphql.GraphQLSchema:
    """The endpoint's schema from an introspection query (cached for a couple of minutes)."""
    hit = _schemas.get(url)
    if hit and not refresh and time.monotonic() - hit[0] < SCHEMA_CACHE_SECONDS:
        return hit[1]
    body = await _post(url, {"query": graphql.get_introspection_query(descriptions=True)}, headers, DEFAULT_TIMEOUT)
    if body.get("errors") or not body.get("data"):
        raise ToolError(f"introspection of {url} failed (is introspection disabled?): {body.get('errors')}")
    try:
        schema = graphql.build_client_schema(body["data"])
    except (TypeError, ValueError, graphql.GraphQLError) as exc:
        raise ToolError(f"{url} answered an unusable introspection result: {exc}") from exc
    _schemas[url] = (time.monotonic(), schema)
    return schema


def _parse(document: str) -> graphql.DocumentNode:
    try:
        return graphql.parse(document)
    except graphql.GraphQLSyntaxError as exc:
        raise ToolError(f"GraphQL syntax error: {exc.message} at {exc.locations}") from exc


def _errors(errors: list[graphql.GraphQLError]) -> list[dict[str, Any]]:
    return [
        {"message": e.message, "locations": [{"line": loc.line, "column": loc.column} for loc in e.locations or []]}
        for e in errors
    ]


def _operation_kinds(doc: graphql.DocumentNode) -> set[str]:
    return {d.operation.value for d in doc.definitions if isinstance(d, graphql.OperationDefinitionNode)}


def _describe_field(name: str, field: graphql.GraphQLField | graphql.GraphQLInputField) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": str(field.type), "description": field.description}
    if isinstance(field, graphql.GraphQLField):
        out["args"] = [
            {"name": a, "type": str(arg.type), "default": _default(arg)} for a, arg in field.args.items()
        ]  # fmt: skip
        out["deprecated"] = field.deprecation_reason
    return out


def _default(arg: graphql.GraphQLArgument) -> str | None:
    """An argument's default as GraphQL literal text (``10``, ``"world"``), or None."""
    if arg.default_value is not graphql.Undefined:
        return graphql.print_ast(ast) if (ast := graphql.ast_from_value(arg.default_value, arg.type)) else None
    literal = getattr(getattr(arg, "default", None), "literal", None)
    return graphql.print_ast(literal) if isinstance(literal, graphql.Node) else None


def _selection(type_: graphql.GraphQLOutputType, depth: int, indent: str) -> str:
    named = graphql.get_named_type(type_)
    if not isinstance(named, graphql.GraphQLObjectType | graphql.GraphQLInterfaceType) or depth <= 0:
        return ""
    lines: list[str] = []
    for name, field in named.fields.items():
        if any(graphql.is_non_null_type(a.type) for a in field.args.values()):
            continue
        inner_named = graphql.get_named_type(field.type)
        if isinstance(inner_named, graphql.GraphQLObjectType | graphql.GraphQLInterfaceType):
            inner = _selection(field.type, depth - 1, indent + "  ")
            if inner:
                lines.append(f"{indent}  {name} {inner}")
        elif not isinstance(inner_named, graphql.GraphQLUnionType):
            lines.append(f"{indent}  {name}")
    return "{\n" + "\n".join(lines) + f"\n{indent}}}" if lines else ""


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the GraphQL tools to ``mcp``."""

    @mcp.tool(
        annotations=READ,
        description="Introspect a GraphQL endpoint and return its schema as SDL, with the root types and type "
        "counts. Use first to learn what an API offers; later GraphQL tools reuse the cached schema.",
    )
    async def graphql_introspect(url: Url, headers: Headers = None, refresh: bool = False) -> CallToolResult:
        schema = await schema_of(url, headers, refresh=refresh)
        sdl = graphql.print_schema(schema)
        roots = {
            "query": schema.query_type.name if schema.query_type else None,
            "mutation": schema.mutation_type.name if schema.mutation_type else None,
            "subscription": schema.subscription_type.name if schema.subscription_type else None,
        }
        user_types = [n for n in schema.type_map if not n.startswith("__")]
        return json_result({"sdl": sdl, "roots": roots, "typeCount": len(user_types)}, text=sdl)

    @mcp.tool(
        annotations=READ,
        description="List the types of a GraphQL schema (name, kind, field count, description), optionally one kind "
        "only. Use to find the object, input or enum type to describe next.",
    )
    async def graphql_list_types(
        url: Url,
        kind: Literal["OBJECT", "INPUT_OBJECT", "ENUM", "INTERFACE", "UNION", "SCALAR"] | None = None,
        include_builtin: bool = False,
        headers: Headers = None,
    ) -> CallToolResult:
        schema = await schema_of(url, headers)
        rows = []
        for name, type_ in sorted(schema.type_map.items()):
            this_kind = _kind(type_)
            if (kind and this_kind != kind) or (not include_builtin and (name.startswith("__") or _builtin(name))):
                continue
            fields = getattr(type_, "fields", None) or getattr(type_, "values", None) or {}
            rows.append([name, this_kind, len(fields), (type_.description or "")[:120]])
        return table_result(["name", "kind", "fields", "description"], rows)

    @mcp.tool(
        annotations=READ,
        description="Describe one GraphQL type: fields with argument and return types (objects, interfaces), input "
        "fields, enum values or union members. Use before writing a query against that type.",
    )
    async def graphql_describe_type(
        url: Url, name: Annotated[str, Field(min_length=1, description="type name, e.g. Query or User")],
        headers: Headers = None,
    ) -> CallToolResult:  # fmt: skip
        schema = await schema_of(url, headers)
        type_ = schema.get_type(name)
        if type_ is None:
            close = [n for n in schema.type_map if n.lower() == name.lower() or name.lower() in n.lower()][:5]
            raise ToolError(f"no type {name!r} in the schema" + (f"; did you mean {close}?" if close else ""))
        out: dict[str, Any] = {"name": name, "kind": _kind(type_), "description": type_.description}
        if isinstance(type_, graphql.GraphQLObjectType | graphql.GraphQLInterfaceType | graphql.GraphQLInputObjectType):
            out["fields"] = [_describe_field(n, f) for n, f in type_.fields.items()]
        if isinstance(type_, graphql.GraphQLObjectType | graphql.GraphQLInterfaceType):
            out["interfaces"] = [i.name for i in type_.interfaces]
        if isinstance(type_, graphql.GraphQLEnumType):
            out["values"] = [{"name": n, "description": v.description} for n, v in type_.values.items()]
        if isinstance(type_, graphql.GraphQLUnionType):
            out["members"] = [t.name for t in type_.types]
        return json_result(out)

    @mcp.tool(
        annotations=READ,
        description="Write a ready-to-run GraphQL document for one root field (a query, mutation or subscription "
        "field): declares a $variable for each argument and selects scalar fields down to depth levels. Use to "
        "start a query without hand-writing the selection set.",
    )
    async def graphql_build_query(
        url: Url,
        field: Annotated[str, Field(min_length=1, description="root field name, e.g. user")],
        operation: Literal["query", "mutation", "subscription"] = "query",
        depth: Annotated[int, Field(ge=1, le=5, description="levels of nested objects selected")] = 2,
        headers: Headers = None,
    ) -> CallToolResult:
        schema = await schema_of(url, headers)
        root = {"query": schema.query_type, "mutation": schema.mutation_type,
                "subscription": schema.subscription_type}[operation]  # fmt: skip
        if root is None or field not in root.fields:
            known = sorted(root.fields) if root else []
            raise ToolError(f"no {operation} field {field!r}; {operation} fields: {known}")
        definition = root.fields[field]
        var_decl = ", ".join(f"${a}: {arg.type}" for a, arg in definition.args.items())
        call_args = ", ".join(f"{a}: ${a}" for a in definition.args)
        selection = _selection(definition.type, depth, "  ")
        head = f"{operation} {field[0].upper()}{field[1:]}" + (f"({var_decl})" if var_decl else "")
        body = f"  {field}" + (f"({call_args})" if call_args else "") + (f" {selection}" if selection else "")
        document = f"{head} {{\n{body}\n}}"
        validation = graphql.validate(schema, graphql.parse(document))
        return json_result(
            {"document": document, "variables": {a: str(arg.type) for a, arg in definition.args.items()},
             "valid": not validation, "errors": _errors(list(validation))},
            text=document,
        )  # fmt: skip

    @mcp.tool(
        annotations=READ,
        description="Validate a GraphQL document against the endpoint's schema locally (syntax, unknown fields, "
        "argument types, variables) without executing it. Returns valid and the errors with line/column.",
    )
    async def graphql_validate(url: Url, query: Document, headers: Headers = None) -> CallToolResult:
        schema = await schema_of(url, headers)
        try:
            doc = graphql.parse(query)
        except graphql.GraphQLSyntaxError as exc:
            return json_result({"valid": False, "errors": _errors([exc])})
        errors = graphql.validate(schema, doc)
        return json_result(
            {"valid": not errors, "errors": _errors(list(errors)), "operations": sorted(_operation_kinds(doc))}
        )

    @mcp.tool(
        annotations=READ,
        description="Run a GraphQL query (read-only: mutations are refused, use graphql_mutate) with variables and "
        "return data and errors as the server answered. Partial data with errors is returned, not raised.",
    )
    async def graphql_query(
        url: Url,
        query: Document,
        variables: Variables = None,
        operation_name: str | None = None,
        headers: Headers = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        kinds = _operation_kinds(_parse(query))
        if "mutation" in kinds or "subscription" in kinds:
            raise ToolError("graphql_query runs queries only; send mutations with graphql_mutate")
        return await _execute(url, query, variables, operation_name, headers, timeout)

    @mcp.tool(
        annotations=WRITE,
        description="Run a GraphQL mutation (changes data on the server) with variables and return data and "
        "errors. The document must contain a mutation operation.",
    )
    async def graphql_mutate(
        url: Url,
        mutation: Document,
        variables: Variables = None,
        operation_name: str | None = None,
        headers: Headers = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        if "mutation" not in _operation_kinds(_parse(mutation)):
            raise ToolError("the document has no mutation operation; use graphql_query for queries")
        return await _execute(url, mutation, variables, operation_name, headers, timeout)


async def _execute(
    url: str, document: str, variables: dict[str, Any] | None, operation_name: str | None,
    headers: dict[str, str] | None, timeout: float,
) -> CallToolResult:  # fmt: skip
    payload: dict[str, Any] = {"query": document}
    if variables:
        payload["variables"] = variables
    if operation_name:
        payload["operationName"] = operation_name
    body = await _post(url, payload, headers, timeout)
    out = {"data": body.get("data"), "errors": body.get("errors") or []}
    if body.get("extensions"):
        out["extensions"] = body["extensions"]
    return json_result(out)


def _kind(type_: graphql.GraphQLNamedType) -> str:
    for cls, name in (
        (graphql.GraphQLObjectType, "OBJECT"), (graphql.GraphQLInputObjectType, "INPUT_OBJECT"),
        (graphql.GraphQLEnumType, "ENUM"), (graphql.GraphQLInterfaceType, "INTERFACE"),
        (graphql.GraphQLUnionType, "UNION"), (graphql.GraphQLScalarType, "SCALAR"),
    ):  # fmt: skip
        if isinstance(type_, cls):
            return name
    return "UNKNOWN"


def _builtin(name: str) -> bool:
    return name in graphql.specified_scalar_types
