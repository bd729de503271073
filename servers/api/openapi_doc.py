"""Pure helpers over a parsed OpenAPI document: operations, local ``$ref`` resolution, spec validation, and
request/response validation through openapi-core."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import referencing.exceptions
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from openapi_spec_validator import OpenAPIV2SpecValidator, OpenAPIV30SpecValidator, OpenAPIV31SpecValidator

from servers._common import ToolError

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_ERRORS = 50
MAX_REF_DEPTH = 12


@dataclass(frozen=True)
class Operation:
    """One (method, path) of the document with its merged parameters."""

    method: str
    path: str
    spec: dict[str, Any]
    parameters: list[dict[str, Any]]

    @property
    def operation_id(self) -> str:
        return str(self.spec.get("operationId") or f"{self.method.upper()} {self.path}")


def require_document(doc: Any) -> dict[str, Any]:
    """The document as a mapping with a version key, or a ToolError saying what it is instead."""
    if not isinstance(doc, dict) or not ("openapi" in doc or "swagger" in doc):
        raise ToolError("not an OpenAPI document (no 'openapi' or 'swagger' key at the top)")
    return doc


def resolve_ref(doc: dict[str, Any], ref: str) -> Any:
    """Follow a local ``#/a/b`` reference (remote references are not fetched)."""
    if not ref.startswith("#/"):
        raise ToolError(f"only local $refs are resolved, not {ref!r}")
    node: Any = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise ToolError(f"$ref {ref!r} points nowhere")
        node = node[part]
    return node


def deref(doc: dict[str, Any], node: Any, depth: int = MAX_REF_DEPTH) -> Any:
    """``node`` with local references inlined, down to ``depth`` (deeper ones stay as ``{"$ref": ...}``)."""
    if isinstance(node, dict):
        if "$ref" in node and isinstance(node["$ref"], str):
            if depth <= 0:
                return {"$ref": node["$ref"]}
            return deref(doc, resolve_ref(doc, node["$ref"]), depth - 1)
        return {k: deref(doc, v, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [deref(doc, v, depth) for v in node]
    return node


def operations(doc: dict[str, Any]) -> Iterator[Operation]:
    """Every operation, with path-level parameters merged under operation-level ones."""
    for path, item in (doc.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        shared = [deref(doc, p, 1) for p in item.get("parameters", [])]
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            own = [deref(doc, p, 1) for p in op.get("parameters", [])]
            keys = {(p.get("name"), p.get("in")) for p in own}
            params = own + [p for p in shared if (p.get("name"), p.get("in")) not in keys]
            yield Operation(method, path, op, params)


def find_operation(doc: dict[str, Any], operation_id: str | None, method: str | None, path: str | None) -> Operation:
    """The operation named by operationId, or by method + path template."""
    ops = list(operations(doc))
    if operation_id:
        for op in ops:
            if op.spec.get("operationId") == operation_id or op.operation_id == operation_id:
                return op
        known = [o.operation_id for o in ops][:40]
        raise ToolError(f"no operation {operation_id!r}; operations: {known}")
    if method and path:
        for op in ops:
            if op.method == method.lower() and op.path == path:
                return op
        raise ToolError(f"no operation {method.upper()} {path}; paths: {sorted({o.path for o in ops})[:40]}")
    raise ToolError("name the operation: operation_id, or method and path")


def spec_errors(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Spec validation errors (message and JSON path); an unresolvable $ref is one error, not a crash."""
    version = str(doc.get("openapi") or doc.get("swagger") or "")
    validator_cls = (
        OpenAPIV31SpecValidator if version.startswith("3.1")
        else OpenAPIV30SpecValidator if version.startswith("3.0")
        else OpenAPIV2SpecValidator if version.startswith("2")
        else None
    )  # fmt: skip
    if validator_cls is None:
        return [{"message": f"unsupported OpenAPI version {version!r} (2.0, 3.0 and 3.1 are)", "path": "openapi"}]
    errors: list[dict[str, Any]] = []
    try:
        for error in validator_cls(doc).iter_errors():
            path = "/".join(str(p) for p in getattr(error, "path", []))
            errors.append({"message": getattr(error, "message", str(error)), "path": path})
            if len(errors) >= MAX_ERRORS:
                break
    except referencing.exceptions.Unresolvable as exc:
        errors.append({"message": f"unresolvable $ref: {exc}", "path": ""})
    return errors


def core(doc: dict[str, Any]) -> OpenAPI:
    """An openapi-core object for ``doc`` (the spec must be valid)."""
    try:
        return OpenAPI.from_dict(doc)
    except Exception as exc:  # openapi-core raises many kinds for a bad spec
        raise ToolError(f"the spec is not valid enough to validate against ({type(exc).__name__}: {exc}); "
                        "run openapi_validate_spec") from exc  # fmt: skip


def _explain(error: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"error": type(error).__name__, "message": str(error)}
    cause = error.__cause__
    details: list[str] = []
    while cause is not None:
        schema_errors = getattr(cause, "schema_errors", None)
        if schema_errors:
            details.extend(
                f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in schema_errors
            )
        else:
            details.append(f"{type(cause).__name__}: {cause}")
        cause = cause.__cause__
    if details:
        out["details"] = details
    return out


def mock_request(
    host_url: str, method: str, path: str, query: dict[str, Any] | None, headers: dict[str, str] | None, body: Any
) -> MockRequest:
    """A request object openapi-core can check (the body as JSON bytes); ``host_url`` may carry a base path."""
    parts = urlsplit(host_url)
    host_url, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/") + path
    data = None if body is None else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
    return MockRequest(
        host_url, method.lower(), path, args={k: str(v) for k, v in (query or {}).items()},
        headers=headers or {}, data=data,
    )  # fmt: skip


def request_errors(api: OpenAPI, request: MockRequest) -> list[dict[str, Any]]:
    """Why the request does not match the spec (empty when it does)."""
    return [_explain(e) for e in api.unmarshal_request(request).errors]


def response_errors(
    api: OpenAPI, request: MockRequest, status: int, body: bytes, content_type: str, headers: dict[str, str]
) -> list[dict[str, Any]]:
    """Why the response does not match the spec for that request (empty when it does)."""
    response = MockResponse(body, status_code=status, headers=headers, content_type=content_type.split(";")[0])
    return [_explain(e) for e in api.unmarshal_response(request, response).errors]


def server_url(doc: dict[str, Any], spec_url: str | None, override: str | None) -> str:
    """The base URL calls go to: ``override``, else the first server (relative ones against the spec's URL)."""
    if override:
        return override.rstrip("/")
    servers = doc.get("servers") or []
    if "swagger" in doc:
        scheme = (doc.get("schemes") or ["http"])[0]
        url = f"{scheme}://{doc['host']}{doc.get('basePath', '')}" if doc.get("host") else doc.get("basePath", "/")
    else:
        url = servers[0].get("url", "/") if servers else "/"
        for name, var in (servers[0].get("variables") or {}).items() if servers else []:
            url = url.replace("{" + name + "}", str(var.get("default", "")))
    if not url.startswith(("http://", "https://")):
        if not spec_url:
            raise ToolError("the spec's server URL is relative and the spec was not loaded from a URL; pass base_url")
        url = urljoin(spec_url, url)
    return url.rstrip("/")
