"""Real loopback backends for the api server's tests: a REST API with its OpenAPI spec, a GraphQL endpoint
(graphql-core executing a schema), an OAuth2 token + introspection endpoint, and a grpc.aio server with reflection
and health whose protobuf descriptors are built at test time."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import graphql
import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.servers.loopback import serve_http

__all__ = ["CLIENT_ID", "CLIENT_SECRET", "SPEC", "TOKEN_KEY", "Store", "build_app", "serve_grpc", "serve_http"]

TOKEN_KEY = "test-token-signing-key-0123456789abcdef"
CLIENT_ID, CLIENT_SECRET = "cli", "s3cret"
REFRESH_TOKENS = {"r1": "r2"}

SPEC: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Items API", "version": "1.2.0", "description": "A small REST API for tests"},
    "servers": [{"url": "/api"}],
    "security": [{"bearer": []}],
    "paths": {
        "/items": {
            "get": {
                "operationId": "listItems", "summary": "List items", "tags": ["items"],
                "parameters": [{"name": "page", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                               {"name": "per_page", "in": "query", "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "items", "content": {"application/json": {
                    "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}}}}},
            },
            "post": {
                "operationId": "createItem", "summary": "Create an item", "tags": ["items"],
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/NewItem"}}}},
                "responses": {"201": {"description": "created", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Item"}}}}},
            },
        },
        "/items/{id}": {
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "get": {
                "operationId": "getItem", "summary": "Get one item", "tags": ["items"],
                "responses": {"200": {"description": "the item", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Item"}}}},
                    "404": {"description": "missing"}},
            },
        },
        "/broken": {
            "get": {
                "operationId": "getBroken", "summary": "Answers a body that breaks its schema", "tags": ["debug"],
                "responses": {"200": {"description": "an item", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Item"}}}}},
            }
        },
    },
    "components": {
        "schemas": {
            "NewItem": {"type": "object", "required": ["name", "price"], "properties": {
                "name": {"type": "string", "minLength": 1}, "price": {"type": "number", "minimum": 0}}},
            "Item": {"type": "object", "required": ["id", "name", "price"], "description": "A stored item",
                     "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                    "price": {"type": "number"}}},
        },
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            "oauth": {"type": "oauth2", "flows": {"clientCredentials": {
                "tokenUrl": "/oauth/token", "scopes": {"items:read": "read items"}}}},
        },
    },
}  # fmt: skip

SDL = """
type Item { id: Int! name: String! price: Float! tags: [String!]! }
type Query { item(id: Int!): Item  items(limit: Int = 10): [Item!]!  hello(name: String = "world"): String! }
type Mutation { addItem(name: String!, price: Float!): Item! }
"""


class Store:
    """The REST and GraphQL data: items by id."""

    def __init__(self) -> None:
        self.items: dict[int, dict[str, Any]] = {
            i: {"id": i, "name": f"item{i}", "price": float(i), "tags": ["even" if i % 2 == 0 else "odd"]}
            for i in range(1, 8)
        }

    def add(self, name: str, price: float) -> dict[str, Any]:
        new_id = max(self.items, default=0) + 1
        self.items[new_id] = {"id": new_id, "name": name, "price": price, "tags": []}
        return self.items[new_id]


def build_app(store: Store) -> Starlette:
    """The REST API under /api, its spec, GraphQL at /graphql, OAuth2 under /oauth, and helpers."""
    schema = graphql.build_schema(SDL)
    root = {
        "item": lambda _info, id: store.items.get(id),
        "items": lambda _info, limit=10: list(store.items.values())[:limit],
        "hello": lambda _info, name="world": f"hello {name}",
        "addItem": lambda _info, name, price: store.add(name, price),
    }

    async def items(request: Request) -> Response:
        if request.method == "POST":
            body = await request.json()
            return JSONResponse({k: v for k, v in store.add(body["name"], body["price"]).items() if k != "tags"}, 201)
        page, per_page = int(request.query_params.get("page", 1)), int(request.query_params.get("per_page", 3))
        rows = list(store.items.values())[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(store.items):
            headers["Link"] = f'</api/items?page={page + 1}&per_page={per_page}>; rel="next"'
        return JSONResponse([{k: v for k, v in r.items() if k != "tags"} for r in rows], headers=headers)

    async def item(request: Request) -> Response:
        item_id = int(request.path_params["id"])
        if request.method == "DELETE":
            return Response(status_code=204 if store.items.pop(item_id, None) else 404)
        if item_id not in store.items:
            return JSONResponse({"error": "not found"}, 404)
        if request.method in ("PUT", "PATCH"):
            body = await request.json()
            store.items[item_id] = ({"id": item_id, "tags": [], **body} if request.method == "PUT"
                                    else {**store.items[item_id], **body})  # fmt: skip
        return JSONResponse({k: v for k, v in store.items[item_id].items() if k != "tags"})

    async def cursor_items(request: Request) -> Response:
        start = int(request.query_params.get("cursor", 0))
        rows = list(store.items.values())[start : start + 2]
        nxt = start + 2 if start + 2 < len(store.items) else None
        return JSONResponse({"data": [r["id"] for r in rows], "meta": {"next": nxt}})

    async def echo(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(headers={"Allow": "GET, POST, OPTIONS", "Access-Control-Allow-Origin": "*",
                                     "Access-Control-Allow-Methods": "GET, POST"})  # fmt: skip
        body = await request.body()
        return JSONResponse({"method": request.method, "query": dict(request.query_params),
                             "headers": dict(request.headers), "body": body.decode()})  # fmt: skip

    async def upload(request: Request) -> Response:
        form = await request.form()
        upload = form["file"]
        assert not isinstance(upload, str)
        data = await upload.read()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        return JSONResponse({"filename": upload.filename, "size": len(data), "fields": fields,
                             "content_type": upload.content_type})  # fmt: skip

    async def blob(_request: Request) -> Response:
        return Response(bytes(range(256)) * 40, media_type="application/octet-stream")

    async def broken(_request: Request) -> Response:
        return JSONResponse({"id": "not-a-number", "name": "x"})

    async def spec(_request: Request) -> Response:
        return JSONResponse(SPEC)

    async def gql(request: Request) -> Response:
        body = await request.json()
        result = await graphql.graphql(schema, body["query"], root_value=root,
                                       variable_values=body.get("variables"),
                                       operation_name=body.get("operationName"))  # fmt: skip
        return JSONResponse(result.formatted)

    async def token(request: Request) -> Response:
        form = await request.form()
        auth = request.headers.get("authorization", "")
        basic = base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else ""
        client = basic or f"{form.get('client_id')}:{form.get('client_secret')}"
        if client != f"{CLIENT_ID}:{CLIENT_SECRET}":
            return JSONResponse({"error": "invalid_client", "error_description": "bad client credentials"}, 401)
        grant = form.get("grant_type")
        if grant == "refresh_token":
            refresh = str(form.get("refresh_token"))
            if refresh not in REFRESH_TOKENS:
                return JSONResponse({"error": "invalid_grant", "error_description": "unknown refresh token"}, 400)
            new_refresh = REFRESH_TOKENS[refresh]
        elif grant == "client_credentials":
            new_refresh = "r1"
        else:
            return JSONResponse({"error": "unsupported_grant_type"}, 400)
        now = int(time.time())
        claims = {"sub": CLIENT_ID, "scope": str(form.get("scope") or "items:read"), "iat": now, "exp": now + 600,
                  "grant": grant}  # fmt: skip
        access = jwt.encode(claims, TOKEN_KEY, algorithm="HS256")
        return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 600,
                             "scope": claims["scope"], "refresh_token": new_refresh})  # fmt: skip

    async def introspect(request: Request) -> Response:
        form = await request.form()
        try:
            claims = jwt.decode(str(form.get("token")), TOKEN_KEY, algorithms=["HS256"])
        except jwt.PyJWTError:
            return JSONResponse({"active": False})
        return JSONResponse({"active": True, "client_id": CLIENT_ID, **claims})

    return Starlette(routes=[
        Route("/api/items", items, methods=["GET", "POST"]),
        Route("/api/items/{id:int}", item, methods=["GET", "PUT", "PATCH", "DELETE"]),
        Route("/api/cursor-items", cursor_items),
        Route("/api/broken", broken),
        Route("/echo", echo, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
        Route("/upload", upload, methods=["POST"]),
        Route("/files/blob.bin", blob),
        Route("/openapi.json", spec),
        Route("/graphql", gql, methods=["POST"]),
        Route("/oauth/token", token, methods=["POST"]),
        Route("/oauth/introspect", introspect, methods=["POST"]),
        Route("/plain", lambda _r: PlainTextResponse("plain text")),
    ])  # fmt: skip


# --- gRPC -------------------------------------------------------------------------------------------------------


def _file_descriptor() -> Any:
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto(name="hanzo_test/demo.proto", package="demo", syntax="proto3")
    f = descriptor_pb2.FieldDescriptorProto
    for name, fields in {
        "HelloRequest": [("name", 1, f.TYPE_STRING), ("times", 2, f.TYPE_INT32)],
        "HelloReply": [("message", 1, f.TYPE_STRING)],
        "Number": [("value", 1, f.TYPE_INT64)],
        "Total": [("sum", 1, f.TYPE_INT64), ("count", 2, f.TYPE_INT32)],
    }.items():
        msg = fdp.message_type.add(name=name)
        for field_name, number, type_ in fields:
            msg.field.add(name=field_name, number=number, type=type_, label=f.LABEL_OPTIONAL)
    service = fdp.service.add(name="Greeter")
    for name, inp, out, cs, ss in [
        ("SayHello", "HelloRequest", "HelloReply", False, False),
        ("Count", "HelloRequest", "HelloReply", False, True),
        ("Sum", "Number", "Total", True, False),
        ("Double", "Number", "Number", True, True),
    ]:
        service.method.add(name=name, input_type=f".demo.{inp}", output_type=f".demo.{out}",
                           client_streaming=cs, server_streaming=ss)  # fmt: skip
    return fdp


async def _grpc_main(port_box: list[int], ready: threading.Event, stop: asyncio.Event) -> None:
    import grpc
    from google.protobuf import descriptor_pool, message_factory
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    from grpc_health.v1.health import aio as health_aio
    from grpc_reflection.v1alpha import reflection

    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName("hanzo_test/demo.proto")
    except KeyError:
        pool.Add(_file_descriptor())
    cls = {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"demo.{n}"))
           for n in ("HelloRequest", "HelloReply", "Number", "Total")}  # fmt: skip

    async def say_hello(request: Any, context: Any) -> Any:
        if request.name == "fail":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name must not be fail")
        await context.send_initial_metadata((("x-served-by", "test"),))
        return cls["HelloReply"](message=f"hello {request.name}")

    async def count(request: Any, _context: Any) -> AsyncIterator[Any]:
        for i in range(request.times or 3):
            yield cls["HelloReply"](message=f"{request.name} {i}")

    async def total(requests: Any, _context: Any) -> Any:
        values = [r.value async for r in requests]
        return cls["Total"](sum=sum(values), count=len(values))

    async def double(requests: Any, _context: Any) -> AsyncIterator[Any]:
        async for r in requests:
            yield cls["Number"](value=r.value * 2)

    def ser(m: Any) -> bytes:
        return bytes(m.SerializeToString())

    handlers = {
        "SayHello": grpc.unary_unary_rpc_method_handler(say_hello, cls["HelloRequest"].FromString, ser),
        "Count": grpc.unary_stream_rpc_method_handler(count, cls["HelloRequest"].FromString, ser),
        "Sum": grpc.stream_unary_rpc_method_handler(total, cls["Number"].FromString, ser),
        "Double": grpc.stream_stream_rpc_method_handler(double, cls["Number"].FromString, ser),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("demo.Greeter", handlers),))
    servicer = health_aio.HealthServicer()
    await servicer.set("demo.Greeter", health_pb2.HealthCheckResponse.SERVING)
    await servicer.set("demo.Paused", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    reflection.enable_server_reflection(["demo.Greeter", health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    port_box.append(server.add_insecure_port("127.0.0.1:0"))
    await server.start()
    ready.set()
    await stop.wait()
    await server.stop(grace=1)


@contextlib.contextmanager
def serve_grpc() -> Iterator[str]:
    """A grpc.aio server (Greeter of four method shapes, reflection, health) on its own loop thread."""
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    ready = threading.Event()
    port_box: list[int] = []

    def runner() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(_grpc_main(port_box, ready, stop))

    thread = threading.Thread(target=runner, daemon=True)
    thread.start()
    if not ready.wait(15):
        raise RuntimeError("the gRPC test server did not start")
    try:
        yield f"127.0.0.1:{port_box[0]}"
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()
