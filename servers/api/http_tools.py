"""HTTP tools: one per verb (their annotations differ), a generic request, download, multipart upload, pagination."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import jmespath
import jmespath.exceptions
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result
from servers.api import net
from servers.api.net import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, Headers, JsonBody, MaxBytes, Query, TextBody, Url
from servers.api.net import Timeout as TimeoutArg

READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)
IDEMPOTENT_WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=True)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=True)

Method = Literal["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]
DOWNLOAD_DIR_ENV = "HANZO_API_DATA_DIR"


def download_dir() -> Path:
    """Where downloads land without an explicit path: ``$HANZO_API_DATA_DIR/downloads`` (set by the manifest)."""
    base = os.environ.get(DOWNLOAD_DIR_ENV)  # noqa: TID251 - the server's only setting, injected by its manifest
    return Path(base) / "downloads" if base else Path(tempfile.gettempdir()) / "hanzo-api-downloads"


async def _send(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    json_body: Any = None,
    text_body: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    follow_redirects: bool = True,
    **extra: Any,
) -> net.Fetched:
    kwargs = net.request_kwargs(headers, params, json_body, text_body) | extra
    async with net.client(timeout, follow_redirects) as http:
        return await net.fetch(http, method, url, max_bytes=max_bytes, **kwargs)


def _next_link(fetched: net.Fetched) -> str | None:
    link = fetched.response.links.get("next")
    return str(fetched.response.url.join(link["url"])) if link and link.get("url") else None


def _search(expression: str, data: Any) -> Any:
    try:
        return jmespath.search(expression, data)
    except jmespath.exceptions.JMESPathError as exc:
        raise ToolError(f"bad JMESPath {expression!r}: {exc}") from exc


def _advance(
    strategy: str, fetched: net.Fetched, url: str, query: dict[str, Any], param: str, got: int, cursor_path: str | None
) -> tuple[str, dict[str, Any]]:
    """The next page's URL and query ('' when there is none)."""
    if strategy == "link":
        return _next_link(fetched) or "", {}
    if strategy == "page":
        return url, {**query, param: int(query[param]) + 1}
    if strategy == "offset":
        return url, {**query, param: int(query[param]) + got}
    cursor = _search(cursor_path or "", fetched.json())
    return ("", query) if cursor in (None, "") else (url, {**query, param: cursor})


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the HTTP tools to ``mcp``."""

    @mcp.tool(
        annotations=READ,
        description="Send an HTTP GET and return status, headers, timing and the body (JSON parsed, text decoded). "
        "Use to read a REST resource or any web endpoint. The body is capped at max_bytes (truncated=true beyond).",
    )
    async def http_get(
        url: Url,
        headers: Headers = None,
        params: Query = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
        follow_redirects: bool = True,
    ) -> CallToolResult:
        fetched = await _send(
            "GET", url, headers=headers, params=params, timeout=timeout, max_bytes=max_bytes,
            follow_redirects=follow_redirects,
        )  # fmt: skip
        return json_result(fetched.summary())

    @mcp.tool(
        annotations=READ,
        description="Send an HTTP HEAD: status and response headers only (content-length, type, ETag, "
        "Last-Modified, caching). Use to check that a URL exists or how big it is without downloading it.",
    )
    async def http_head(
        url: Url, headers: Headers = None, timeout: TimeoutArg = DEFAULT_TIMEOUT, follow_redirects: bool = True
    ) -> CallToolResult:
        fetched = await _send("HEAD", url, headers=headers, timeout=timeout, follow_redirects=follow_redirects)
        out = fetched.summary(include_body=False)
        length = fetched.response.headers.get("content-length")
        out["contentLength"] = int(length) if length and length.isdigit() else None
        return json_result(out)

    @mcp.tool(
        annotations=READ,
        description="Send an HTTP OPTIONS and report the allowed methods (Allow header) and the CORS headers. "
        "Use to discover what a REST endpoint accepts; pass origin to see a CORS preflight answer.",
    )
    async def http_options(
        url: Url,
        origin: Annotated[str | None, Field(description="Origin header for a CORS preflight")] = None,
        request_method: Annotated[Method | None, Field(description="Access-Control-Request-Method")] = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        headers = {"Origin": origin} if origin else {}
        if request_method:
            headers["Access-Control-Request-Method"] = request_method
        fetched = await _send("OPTIONS", url, headers=headers, timeout=timeout)
        allow = fetched.response.headers.get("allow", "")
        cors = {k: v for k, v in fetched.response.headers.items() if k.lower().startswith("access-control-")}
        out = fetched.summary()
        out.update(allow=[m.strip() for m in allow.split(",") if m.strip()], cors=cors)
        return json_result(out)

    @mcp.tool(
        annotations=WRITE,
        description="Send an HTTP POST with a JSON body (json) or a raw text body (body) and return the response. "
        "Use to create resources or call RPC-style endpoints; not idempotent.",
    )
    async def http_post(
        url: Url,
        json: JsonBody = None,
        body: TextBody = "",
        headers: Headers = None,
        params: Query = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
    ) -> CallToolResult:
        fetched = await _send(
            "POST", url, headers=headers, params=params, json_body=json, text_body=body, timeout=timeout,
            max_bytes=max_bytes,
        )  # fmt: skip
        return json_result(fetched.summary())

    @mcp.tool(
        annotations=IDEMPOTENT_WRITE,
        description="Send an HTTP PUT (replace a resource) with a JSON or text body and return the response. "
        "Idempotent: repeating it leaves the same state.",
    )
    async def http_put(
        url: Url,
        json: JsonBody = None,
        body: TextBody = "",
        headers: Headers = None,
        params: Query = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        fetched = await _send(
            "PUT", url, headers=headers, params=params, json_body=json, text_body=body, timeout=timeout
        )
        return json_result(fetched.summary())

    @mcp.tool(
        annotations=WRITE,
        description="Send an HTTP PATCH (partial update, e.g. a JSON merge patch) and return the response. "
        "Set content_type for application/merge-patch+json or application/json-patch+json.",
    )
    async def http_patch(
        url: Url,
        json: JsonBody = None,
        content_type: Annotated[str, Field(description="Content-Type of the JSON body")] = "application/json",
        headers: Headers = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        all_headers = {"Content-Type": content_type, **(headers or {})}
        fetched = await _send("PATCH", url, headers=all_headers, json_body=json, timeout=timeout)
        return json_result(fetched.summary())

    @mcp.tool(
        annotations=DESTRUCTIVE,
        description="Send an HTTP DELETE to remove a resource and return the response (status 200/202/204 on "
        "success). Destructive: the resource is gone afterwards.",
    )
    async def http_delete(
        url: Url, headers: Headers = None, params: Query = None, timeout: TimeoutArg = DEFAULT_TIMEOUT
    ) -> CallToolResult:
        fetched = await _send("DELETE", url, headers=headers, params=params, timeout=timeout)
        return json_result(fetched.summary())

    @mcp.tool(
        annotations=WRITE,
        description="Send any HTTP request: choose the method, a JSON, text or form-encoded body, headers and query, "
        "and optionally the status codes you expect (another status becomes an error). Use when a verb tool does "
        "not fit, e.g. form posts or asserting a status.",
    )
    async def http_request(
        method: Method,
        url: Url,
        json: JsonBody = None,
        body: TextBody = "",
        form: Annotated[dict[str, str] | None, Field(description="fields sent form-urlencoded")] = None,
        headers: Headers = None,
        params: Query = None,
        expect_status: Annotated[list[int] | None, Field(description="acceptable status codes")] = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
        follow_redirects: bool = True,
    ) -> CallToolResult:
        if form is not None and (json is not None or body):
            raise ToolError("give one of json, body or form")
        extra = {"data": form} if form is not None else {}
        fetched = await _send(
            method, url, headers=headers, params=params, json_body=json, text_body=body, timeout=timeout,
            max_bytes=max_bytes, follow_redirects=follow_redirects, **extra,
        )  # fmt: skip
        if expect_status and fetched.status not in expect_status:
            raise ToolError(
                f"{method} {url} answered {fetched.status}, expected {expect_status}: {fetched.text()[:300]}"
            )
        return json_result(fetched.summary())

    @mcp.tool(
        annotations=WRITE,
        description="Download a URL to a local file (streamed, capped at max_bytes: a larger file is an error, never "
        "a partial file). Returns the path, size, SHA-256 and content type. Without path the file goes to the "
        "server's download folder under the URL's file name.",
    )
    async def http_download(
        url: Url,
        path: Annotated[str | None, Field(description="destination file; default: download folder")] = None,
        headers: Headers = None,
        timeout: TimeoutArg = 120.0,
        max_bytes: Annotated[int, Field(ge=1, le=2_000_000_000, description="largest accepted file")] = 100_000_000,
        overwrite: bool = False,
    ) -> CallToolResult:
        name = Path(url.split("?", 1)[0].rstrip("/")).name or "download"
        target = Path(await anyio.Path(path).expanduser()) if path else download_dir() / name
        if await anyio.Path(target).exists() and not overwrite:
            raise ToolError(f"{target} exists; pass overwrite=true or another path")
        await anyio.Path(target.parent).mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        digest, size = hashlib.sha256(), 0
        async with net.client(timeout) as http:
            with net.mapped_errors(url):
                async with http.stream("GET", url, headers=headers or {}) as response:
                    if response.status_code >= 400:
                        raise ToolError(f"GET {url} answered {response.status_code}; nothing written")
                    async with await anyio.open_file(partial, "wb") as out:
                        async for chunk in response.aiter_bytes():
                            size += len(chunk)
                            if size > max_bytes:
                                await out.aclose()
                                partial.unlink(missing_ok=True)
                                raise ToolError(f"{url} is larger than max_bytes={max_bytes}; nothing written")
                            digest.update(chunk)
                            await out.write(chunk)
                    content_type = response.headers.get("content-type", "")
        partial.replace(target)
        return json_result(
            {"path": str(target), "bytes": size, "sha256": digest.hexdigest(), "contentType": content_type}
        )

    @mcp.tool(
        annotations=WRITE,
        description="Upload a local file as multipart/form-data (field name configurable, extra form fields "
        "allowed) and return the response. Use for file-upload endpoints.",
    )
    async def http_upload(
        url: Url,
        path: Annotated[str, Field(min_length=1, description="local file to upload")],
        field: Annotated[str, Field(min_length=1, description="form field name of the file")] = "file",
        fields: Annotated[dict[str, str] | None, Field(description="extra form fields")] = None,
        content_type: Annotated[str, Field(description="the file part's content type")] = "application/octet-stream",
        method: Literal["POST", "PUT"] = "POST",
        headers: Headers = None,
        timeout: TimeoutArg = 120.0,
    ) -> CallToolResult:
        source = Path(await anyio.Path(path).expanduser())
        if not await anyio.Path(source).is_file():
            raise ToolError(f"no file at {source}")
        data = await anyio.Path(source).read_bytes()
        fetched = await _send(
            method, url, headers=headers, timeout=timeout, files={field: (source.name, data, content_type)},
            data=fields or {},
        )  # fmt: skip
        out = fetched.summary()
        out["uploadedBytes"] = len(data)
        return json_result(out)

    @mcp.tool(
        annotations=READ,
        description="GET every page of a paginated JSON API and return the collected items. Strategies: 'link' "
        "follows the Link rel=next header, 'page' increments a page parameter, 'offset' advances an offset by the "
        "page size, 'cursor' reads the next cursor from the response (cursor_path, a JMESPath) and sends it as "
        "cursor_param. items_path (JMESPath) picks the items of each page; stops on an empty page or max_pages.",
    )
    async def http_paginate(
        url: Url,
        strategy: Literal["link", "page", "offset", "cursor"] = "link",
        items_path: Annotated[str, Field(description="JMESPath to the item list ('@' = the whole body)")] = "@",
        page_param: Annotated[str, Field(description="parameter of the page, offset or cursor")] = "page",
        start: Annotated[int, Field(ge=0, description="first page number or offset")] = 1,
        page_size: Annotated[int | None, Field(ge=1, le=10_000, description="sent as size_param")] = None,
        size_param: str = "per_page",
        cursor_path: Annotated[str | None, Field(description="JMESPath to the next cursor (cursor strategy)")] = None,
        max_pages: Annotated[int, Field(ge=1, le=1000)] = 20,
        max_items: Annotated[int, Field(ge=1, le=100_000)] = 5000,
        headers: Headers = None,
        params: Query = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
    ) -> CallToolResult:
        if strategy == "cursor" and not cursor_path:
            raise ToolError("the cursor strategy needs cursor_path (JMESPath to the next cursor in each page)")
        if strategy == "offset" and not page_size:
            raise ToolError("the offset strategy needs page_size")
        query: dict[str, Any] = dict(params or {})
        if page_size:
            query[size_param] = page_size
        if strategy in ("page", "offset"):
            query[page_param] = start
        items: list[Any] = []
        pages, next_url = 0, url
        async with net.client(timeout) as http:
            while next_url and pages < max_pages and len(items) < max_items:
                kwargs = net.request_kwargs(headers, query)
                fetched = await net.fetch(http, "GET", next_url, **kwargs)
                if fetched.status >= 400:
                    raise ToolError(f"page {pages + 1} ({next_url}) answered {fetched.status}: {fetched.text()[:300]}")
                page_items = _search(items_path, fetched.json())
                if not isinstance(page_items, list):
                    raise ToolError(f"items_path {items_path!r} did not select a list on page {pages + 1}")
                pages += 1
                items.extend(page_items)
                if not page_items:
                    break
                next_url, query = _advance(strategy, fetched, next_url, query, page_param, len(page_items), cursor_path)
        return json_result({"items": items[:max_items], "itemCount": min(len(items), max_items), "pages": pages})
