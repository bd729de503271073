"""gRPC tools over server reflection: list and describe services, make request templates, call methods of all
four shapes (unary, server stream, client stream, bidi stream) with JSON messages, and check health."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.api import grpc_client as gc

READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)
CALL = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)
T = TypeVar("T")

Target = Annotated[str, Field(pattern=r"^[\w.\-\[\]:]+:\d+$", description="server address host:port")]
Tls = Annotated[bool, Field(description="use TLS with the system roots (default: plaintext)")]
MethodName = Annotated[str, Field(min_length=3, description="full method name, package.Service/Method")]
Request = Annotated[dict[str, Any], Field(description="the request message as JSON (proto field names)")]
Metadata = Annotated[dict[str, str] | None, Field(description="call metadata (headers), lowercase keys")]
Deadline = Annotated[float, Field(gt=0, le=300, description="deadline of the call in seconds")]
MaxMessages = Annotated[int, Field(ge=1, le=10_000, description="stop reading after this many responses")]


async def _in_thread(fn: Callable[[], T], timeout: float) -> T:
    """Run blocking gRPC work in a worker thread, bounded by ``timeout`` plus the connect bound."""
    with anyio.fail_after(timeout + gc.CONNECT_TIMEOUT + 2):
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)


def _metadata(metadata: dict[str, str] | None) -> list[tuple[str, str]]:
    return [(k.lower(), v) for k, v in (metadata or {}).items()]


def _call(target: str, tls: bool, name: str, want: str, run: Callable[[Any, Any], Any]) -> dict[str, Any]:
    """Connect, reflect ``name``, check its shape is ``want`` and give ``run`` the stub and method."""
    with gc.channel(target, tls) as chan:
        method = gc.Reflected(chan).method(name)
        if gc.shape(method) != want:
            raise ToolError(f"{name} is a {gc.shape(method)} method; use the grpc tool for that shape, not {want}")
        result: dict[str, Any] = run(gc.stub(chan, method), method)
        result["method"] = f"{method.containing_service.full_name}/{method.name}"
        return result


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the gRPC tools to ``mcp``."""

    @mcp.tool(
        annotations=READ,
        description="List the services of a gRPC server through server reflection, with each service's methods "
        "and their shapes (unary, server-stream, client-stream, bidi-stream). Use first against a gRPC server.",
    )
    async def grpc_list_services(target: Target, tls: Tls = False) -> CallToolResult:
        def work() -> list[list[Any]]:
            with gc.channel(target, tls) as chan:
                reflected = gc.Reflected(chan)
                rows = []
                for name in reflected.services():
                    service = reflected.service(name)
                    methods = ", ".join(f"{m.name} ({gc.shape(m)})" for m in service.methods)
                    rows.append([name, len(service.methods), methods])
                return rows

        return table_result(["service", "methodCount", "methods"], await _in_thread(work, 10))

    @mcp.tool(
        annotations=READ,
        description="Describe a gRPC symbol found by reflection: a service (its methods), a method (input and "
        "output message types, streaming shape), a message (fields with numbers and types) or an enum.",
    )
    async def grpc_describe(
        target: Target,
        symbol: Annotated[str, Field(min_length=1, description="e.g. pkg.Service, pkg.Service/Method, pkg.Msg")],
        tls: Tls = False,
    ) -> CallToolResult:
        def work() -> dict[str, Any]:
            with gc.channel(target, tls) as chan:
                return gc.describe(gc.Reflected(chan).symbol(symbol))

        return json_result(await _in_thread(work, 10))

    @mcp.tool(
        annotations=READ,
        description="Make an example JSON request for a gRPC method (or message type): every field with a "
        "placeholder value, nested messages filled in. Edit it and pass it to a grpc call tool.",
    )
    async def grpc_request_template(
        target: Target,
        symbol: Annotated[str, Field(min_length=1, description="pkg.Service/Method or a message name")],
        tls: Tls = False,
    ) -> CallToolResult:
        def work() -> dict[str, Any]:
            with gc.channel(target, tls) as chan:
                found = gc.Reflected(chan).symbol(symbol)
                if isinstance(found, gc.descriptor.MethodDescriptor):
                    found = found.input_type
                if not isinstance(found, gc.descriptor.Descriptor):
                    raise ToolError(f"{symbol} is not a method or a message")
                return {"message": found.full_name, "template": gc.template(found)}

        return json_result(await _in_thread(work, 10))

    @mcp.tool(
        annotations=CALL,
        description="Call a unary gRPC method with a JSON request (the message types come from reflection) and "
        "return the JSON response with the server's initial and trailing metadata.",
    )
    async def grpc_call(
        target: Target, method: MethodName, request: Request, metadata: Metadata = None,
        timeout: Deadline = 30.0, tls: Tls = False,
    ) -> CallToolResult:  # fmt: skip
        def run(call: Any, desc: Any) -> dict[str, Any]:
            response, info = call.with_call(gc.to_message(desc.input_type, request), timeout=timeout,
                                            metadata=_metadata(metadata))  # fmt: skip
            return {"response": gc.to_dict(response), "initialMetadata": dict(info.initial_metadata() or []),
                    "trailingMetadata": dict(info.trailing_metadata() or [])}  # fmt: skip

        return json_result(await _in_thread(lambda: _call(target, tls, method, "unary", run), timeout))

    @mcp.tool(
        annotations=CALL,
        description="Call a server-streaming gRPC method with one JSON request and collect the streamed responses "
        "(up to max_messages or the deadline). Returns the messages in order.",
    )
    async def grpc_server_stream(
        target: Target, method: MethodName, request: Request, metadata: Metadata = None,
        max_messages: MaxMessages = 100, timeout: Deadline = 30.0, tls: Tls = False,
    ) -> CallToolResult:  # fmt: skip
        def run(call: Any, desc: Any) -> dict[str, Any]:
            stream = call(gc.to_message(desc.input_type, request), timeout=timeout, metadata=_metadata(metadata))
            messages = [gc.to_dict(m) for m in itertools.islice(stream, max_messages)]
            complete = len(messages) < max_messages
            stream.cancel()
            return {"messages": messages, "count": len(messages), "complete": complete}

        return json_result(await _in_thread(lambda: _call(target, tls, method, "server-stream", run), timeout))

    @mcp.tool(
        annotations=CALL,
        description="Call a client-streaming gRPC method: send a list of JSON request messages in order, then "
        "return the single JSON response.",
    )
    async def grpc_client_stream(
        target: Target, method: MethodName,
        requests: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=10_000, description="messages")],
        metadata: Metadata = None, timeout: Deadline = 30.0, tls: Tls = False,
    ) -> CallToolResult:  # fmt: skip
        def run(call: Any, desc: Any) -> dict[str, Any]:
            messages = [gc.to_message(desc.input_type, r) for r in requests]
            response = call(iter(messages), timeout=timeout, metadata=_metadata(metadata))
            return {"response": gc.to_dict(response), "sent": len(messages)}

        return json_result(await _in_thread(lambda: _call(target, tls, method, "client-stream", run), timeout))

    @mcp.tool(
        annotations=CALL,
        description="Call a bidirectional-streaming gRPC method: send the JSON request messages, half-close, and "
        "collect the responses (up to max_messages or the deadline).",
    )
    async def grpc_bidi_stream(
        target: Target, method: MethodName,
        requests: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=10_000, description="messages")],
        metadata: Metadata = None, max_messages: MaxMessages = 100, timeout: Deadline = 30.0, tls: Tls = False,
    ) -> CallToolResult:  # fmt: skip
        def run(call: Any, desc: Any) -> dict[str, Any]:
            messages = [gc.to_message(desc.input_type, r) for r in requests]
            stream = call(iter(messages), timeout=timeout, metadata=_metadata(metadata))
            received = [gc.to_dict(m) for m in itertools.islice(stream, max_messages)]
            stream.cancel()
            return {"messages": received, "count": len(received), "sent": len(messages)}

        return json_result(await _in_thread(lambda: _call(target, tls, method, "bidi-stream", run), timeout))

    @mcp.tool(
        annotations=READ,
        description="Check a gRPC server's health with the standard grpc.health.v1 service: SERVING, NOT_SERVING, "
        "SERVICE_UNKNOWN or UNKNOWN, for the whole server (service='') or one service.",
    )
    async def grpc_health(
        target: Target,
        service: Annotated[str, Field(description="service name; '' for the whole server")] = "",
        timeout: Deadline = 5.0,
        tls: Tls = False,
    ) -> CallToolResult:
        def work() -> dict[str, Any]:
            with gc.channel(target, tls, min(gc.CONNECT_TIMEOUT, timeout)) as chan:
                stub = health_pb2_grpc.HealthStub(chan)
                try:
                    reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
                except grpc.RpcError as exc:
                    if exc.code() == grpc.StatusCode.NOT_FOUND:
                        return {"service": service, "status": "SERVICE_UNKNOWN"}
                    if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                        raise ToolError(f"{target} does not implement grpc.health.v1.Health") from exc
                    raise
                return {"service": service, "status": health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}

        return json_result(await _in_thread(work, timeout))
