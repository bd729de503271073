"""The api server's gRPC tools through MCP against a real grpc.aio server with reflection and health."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from servers.api.server import mcp
from tests.servers.api_backends import serve_grpc
from tests.servers.conftest import Client, err, ok

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    with serve_grpc() as address:
        yield address


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp) as c:
        yield c


async def call(client: Client, tool: str, **args: Any) -> Any:
    return await client.call_tool(tool, args)


async def test_grpc_lists_and_describes_services_by_reflection(client: Client, target: str) -> None:
    listed = ok(await call(client, "grpc_list_services", target=target))
    rows = {r[0]: r for r in listed["rows"]}
    assert {"demo.Greeter", "grpc.health.v1.Health"} <= set(rows)
    assert rows["demo.Greeter"][1] == 4
    assert "Double (bidi-stream)" in rows["demo.Greeter"][2]
    service = ok(await call(client, "grpc_describe", target=target, symbol="demo.Greeter"))
    shapes = {m["name"]: m["shape"] for m in service["methods"]}
    assert shapes == {"demo.Greeter/SayHello": "unary", "demo.Greeter/Count": "server-stream",
                      "demo.Greeter/Sum": "client-stream", "demo.Greeter/Double": "bidi-stream"}  # fmt: skip
    message = ok(await call(client, "grpc_describe", target=target, symbol="demo.Total"))
    assert [(f["name"], f["type"], f["number"]) for f in message["fields"]] == [("sum", "int64", 1),
                                                                                 ("count", "int32", 2)]  # fmt: skip
    method = ok(await call(client, "grpc_describe", target=target, symbol="demo.Greeter/Sum"))
    assert method["input"] == "demo.Number"
    assert method["clientStreaming"]
    assert not method["serverStreaming"]
    template = ok(await call(client, "grpc_request_template", target=target, symbol="demo.Greeter/SayHello"))
    assert template == {"message": "demo.HelloRequest", "template": {"name": "", "times": 0}}
    assert "no service, method, message or enum" in err(await call(client, "grpc_describe", target=target,
                                                                   symbol="demo.Nope"))  # fmt: skip


async def test_grpc_calls_of_all_four_shapes(client: Client, target: str) -> None:
    unary = ok(await call(client, "grpc_call", target=target, method="demo.Greeter/SayHello",
                          request={"name": "ada"}, metadata={"X-Trace": "1"}))  # fmt: skip
    assert unary["response"] == {"message": "hello ada"}
    assert unary["initialMetadata"]["x-served-by"] == "test"
    streamed = ok(await call(client, "grpc_server_stream", target=target, method="demo.Greeter/Count",
                             request={"name": "n", "times": 4}))  # fmt: skip
    assert [m["message"] for m in streamed["messages"]] == ["n 0", "n 1", "n 2", "n 3"]
    assert streamed["complete"]
    capped = ok(await call(client, "grpc_server_stream", target=target, method="demo.Greeter/Count",
                           request={"name": "n", "times": 50}, max_messages=5))  # fmt: skip
    assert capped["count"] == 5
    assert not capped["complete"]
    summed = ok(await call(client, "grpc_client_stream", target=target, method="demo.Greeter/Sum",
                           requests=[{"value": 3}, {"value": "4"}, {"value": 5}]))  # fmt: skip
    assert summed["response"] == {"sum": "12", "count": 3}
    assert summed["sent"] == 3
    doubled = ok(await call(client, "grpc_bidi_stream", target=target, method="demo.Greeter/Double",
                            requests=[{"value": 1}, {"value": 21}]))  # fmt: skip
    assert [m["value"] for m in doubled["messages"]] == ["2", "42"]


async def test_grpc_health_reports_serving_states(client: Client, target: str) -> None:
    assert ok(await call(client, "grpc_health", target=target))["status"] == "SERVING"
    assert ok(await call(client, "grpc_health", target=target, service="demo.Greeter"))["status"] == "SERVING"
    assert ok(await call(client, "grpc_health", target=target, service="demo.Paused"))["status"] == "NOT_SERVING"
    assert ok(await call(client, "grpc_health", target=target, service="demo.Ghost"))["status"] == "SERVICE_UNKNOWN"


async def test_grpc_bad_calls_are_clear_errors(client: Client, target: str) -> None:
    aborted = err(await call(client, "grpc_call", target=target, method="demo.Greeter/SayHello",
                             request={"name": "fail"}))  # fmt: skip
    assert "INVALID_ARGUMENT" in aborted
    assert "must not be fail" in aborted
    wrong_shape = err(await call(client, "grpc_call", target=target, method="demo.Greeter/Count", request={}))
    assert "server-stream method" in wrong_shape
    bad_field = err(await call(client, "grpc_call", target=target, method="demo.Greeter/SayHello",
                               request={"nmae": "x"}))  # fmt: skip
    assert "does not fit demo.HelloRequest" in bad_field
    assert "has no method" in err(await call(client, "grpc_call", target=target, method="demo.Greeter/Nope",
                                             request={}))  # fmt: skip
    assert "cannot connect" in err(await call(client, "grpc_health", target="127.0.0.1:9", timeout=1))
