"""Blocking gRPC plumbing run in worker threads: channels, reflection-backed descriptors, dynamic stubs.

Every call has a deadline and the channel is closed afterwards; reflection lookups go through a fresh
``DescriptorPool`` per channel, so descriptors of different servers never mix.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import grpc
from google.protobuf import descriptor, descriptor_pool, json_format, message_factory
from google.protobuf.message import Message
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from servers._common import ToolError

__all__ = ["CONNECT_TIMEOUT", "Reflected", "channel", "describe", "descriptor", "shape", "stub", "template"]
__all__ += ["message_class", "rpc_errors", "to_dict", "to_message"]

CONNECT_TIMEOUT = 5.0
TYPE_NAMES = {
    v: k[len("TYPE_") :].lower() for k, v in descriptor.FieldDescriptor.__dict__.items() if k.startswith("TYPE_")
}


@contextlib.contextmanager
def channel(target: str, tls: bool, connect_timeout: float = CONNECT_TIMEOUT) -> Iterator[grpc.Channel]:
    """A connected channel to ``target`` (host:port), closed on exit; unreachable targets fail within the bound."""
    chan = grpc.secure_channel(target, grpc.ssl_channel_credentials()) if tls else grpc.insecure_channel(target)
    try:
        try:
            grpc.channel_ready_future(chan).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError as exc:
            raise ToolError(f"cannot connect to gRPC server {target} within {connect_timeout}s") from exc
        with rpc_errors(target):
            yield chan
    finally:
        chan.close()


@contextlib.contextmanager
def rpc_errors(target: str) -> Iterator[None]:
    """A failed RPC becomes a ToolError with the status code and details."""
    try:
        yield
    except grpc.RpcError as exc:
        code = exc.code().name if hasattr(exc, "code") and exc.code() else "UNKNOWN"
        details = exc.details() if hasattr(exc, "details") else str(exc)
        hint = "; does the server enable reflection?" if code == "UNIMPLEMENTED" else ""
        raise ToolError(f"gRPC call to {target} failed: {code}: {details}{hint}") from exc


class Reflected:
    """Descriptors of one server, fetched lazily through its reflection service."""

    def __init__(self, chan: grpc.Channel) -> None:
        self.db = ProtoReflectionDescriptorDatabase(chan)
        self.pool = descriptor_pool.DescriptorPool(self.db)

    def services(self) -> list[str]:
        return sorted(self.db.get_services())

    def service(self, name: str) -> descriptor.ServiceDescriptor:
        try:
            return self.pool.FindServiceByName(name)
        except KeyError as exc:
            raise ToolError(f"no service {name!r}; services: {self.services()}") from exc

    def method(self, name: str) -> descriptor.MethodDescriptor:
        """``pkg.Service/Method`` or ``pkg.Service.Method``."""
        service_name, sep, method_name = name.replace("/", ".").rpartition(".")
        if not sep or not service_name:
            raise ToolError(f"name a method as package.Service/Method, not {name!r}")
        service = self.service(service_name)
        found = service.methods_by_name.get(method_name)
        if found is None:
            raise ToolError(f"{service_name} has no method {method_name!r}; methods: {sorted(service.methods_by_name)}")
        return found

    def symbol(self, name: str) -> descriptor.DescriptorBase:
        for finder in (self.pool.FindServiceByName, self.pool.FindMessageTypeByName, self.pool.FindEnumTypeByName):
            with contextlib.suppress(KeyError):
                return finder(name)  # type: ignore[no-any-return,unused-ignore]
        with contextlib.suppress(ToolError):
            return self.method(name)
        raise ToolError(f"no service, method, message or enum {name!r}; services: {self.services()}")


def message_class(desc: descriptor.Descriptor) -> type[Message]:
    cls: type[Message] = message_factory.GetMessageClass(desc)
    return cls


def to_message(desc: descriptor.Descriptor, value: dict[str, Any]) -> Message:
    """A protobuf message from its JSON form (field names as in the .proto or lowerCamel)."""
    msg = message_class(desc)()
    try:
        json_format.ParseDict(value, msg)
    except json_format.ParseError as exc:
        raise ToolError(f"request does not fit {desc.full_name}: {exc}") from exc
    return msg


def to_dict(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    return out


def describe(symbol: descriptor.DescriptorBase) -> dict[str, Any]:
    """A JSON description of a service, method, message or enum."""
    if isinstance(symbol, descriptor.ServiceDescriptor):
        return {"kind": "service", "name": symbol.full_name, "methods": [describe(m) for m in symbol.methods]}
    if isinstance(symbol, descriptor.MethodDescriptor):
        return {
            "kind": "method", "name": f"{symbol.containing_service.full_name}/{symbol.name}",
            "input": symbol.input_type.full_name, "output": symbol.output_type.full_name,
            "clientStreaming": symbol.client_streaming, "serverStreaming": symbol.server_streaming,
            "shape": shape(symbol),
        }  # fmt: skip
    if isinstance(symbol, descriptor.EnumDescriptor):
        return {"kind": "enum", "name": symbol.full_name, "values": {v.name: v.number for v in symbol.values}}
    assert isinstance(symbol, descriptor.Descriptor)
    return {"kind": "message", "name": symbol.full_name, "fields": [_field(f) for f in symbol.fields]}


def _field(f: descriptor.FieldDescriptor) -> dict[str, Any]:
    type_name = (f.message_type.full_name if f.message_type else f.enum_type.full_name if f.enum_type
                 else TYPE_NAMES.get(f.type, str(f.type)))  # fmt: skip
    return {"name": f.name, "number": f.number, "type": type_name, "repeated": f.is_repeated}


def shape(method: descriptor.MethodDescriptor) -> str:
    """unary, server-stream, client-stream or bidi-stream."""
    return {(False, False): "unary", (False, True): "server-stream", (True, False): "client-stream",
            (True, True): "bidi-stream"}[(method.client_streaming, method.server_streaming)]  # fmt: skip


def template(desc: descriptor.Descriptor, depth: int = 3) -> dict[str, Any]:
    """An example JSON request with every field at a placeholder value (nested messages to ``depth``)."""
    out: dict[str, Any] = {}
    for f in desc.fields:
        if f.message_type is not None:
            value: Any = template(f.message_type, depth - 1) if depth > 1 else {}
        elif f.enum_type is not None:
            value = f.enum_type.values[0].name
        else:
            value = {"string": "", "bytes": "", "bool": False, "double": 0.0, "float": 0.0}.get(
                TYPE_NAMES.get(f.type, ""), 0
            )
        out[f.name] = [value] if f.is_repeated else value
    return out


def stub(chan: grpc.Channel, method: descriptor.MethodDescriptor) -> Any:
    """A callable for ``method`` of the channel's shape (unary_unary, unary_stream, ...)."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    response_cls = message_class(method.output_type)
    factory = {"unary": chan.unary_unary, "server-stream": chan.unary_stream, "client-stream": chan.stream_unary,
               "bidi-stream": chan.stream_stream}[shape(method)]  # fmt: skip
    return factory(
        path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=response_cls.FromString
    )
