"""The api server through MCP against real loopback services: REST + OpenAPI, GraphQL, OAuth2, webhooks; JSON."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from servers.api.server import mcp
from tests.servers.api_backends import CLIENT_ID, CLIENT_SECRET, SPEC, TOKEN_KEY, Store, build_app, serve_http
from tests.servers.conftest import Client, err, ok

pytestmark = pytest.mark.anyio
AUTH = {"Authorization": "Bearer test-token"}


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve_http(build_app(Store())) as url:
        yield url


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp) as c:
        yield c


async def call(client: Client, tool: str, **args: Any) -> Any:
    return await client.call_tool(tool, args)


# --- HTTP ---------------------------------------------------------------------------------------------------------


async def test_http_verbs_round_trip_a_rest_resource(client: Client, base: str) -> None:
    got = ok(await call(client, "http_get", url=f"{base}/api/items/2"))
    assert got["status"] == 200
    assert got["json"] == {"id": 2, "name": "item2", "price": 2.0}
    created = ok(await call(client, "http_post", url=f"{base}/api/items", json={"name": "new", "price": 9.5}))
    assert created["status"] == 201
    new_id = created["json"]["id"]
    put = ok(await call(client, "http_put", url=f"{base}/api/items/{new_id}", json={"name": "renamed", "price": 1}))
    assert put["json"]["name"] == "renamed"
    patched = ok(await call(client, "http_patch", url=f"{base}/api/items/{new_id}", json={"price": 3.25},
                            content_type="application/merge-patch+json"))  # fmt: skip
    assert patched["json"] == {"id": new_id, "name": "renamed", "price": 3.25}
    assert ok(await call(client, "http_delete", url=f"{base}/api/items/{new_id}"))["status"] == 204
    assert ok(await call(client, "http_get", url=f"{base}/api/items/{new_id}"))["status"] == 404


async def test_http_head_and_options_report_headers(client: Client, base: str) -> None:
    head = ok(await call(client, "http_head", url=f"{base}/files/blob.bin"))
    assert head["status"] == 200
    assert head["contentLength"] == 10240
    assert head["bytes"] == 0
    options = ok(await call(client, "http_options", url=f"{base}/echo", origin="http://example.test",
                            request_method="POST"))  # fmt: skip
    assert options["allow"] == ["GET", "POST", "OPTIONS"]
    assert options["cors"]["access-control-allow-origin"] == "*"


async def test_http_request_sends_forms_query_and_checks_status(client: Client, base: str) -> None:
    echoed = ok(await call(client, "http_request", method="POST", url=f"{base}/echo", form={"a": "1", "b": "x y"},
                           params={"flag": True, "n": 3}, headers={"X-Test": "yes"}))  # fmt: skip
    assert echoed["json"]["body"] == "a=1&b=x+y"
    assert echoed["json"]["query"] == {"flag": "true", "n": "3"}
    assert echoed["json"]["headers"]["x-test"] == "yes"
    message = err(await call(client, "http_request", method="GET", url=f"{base}/api/items/999", expect_status=[200]))
    assert "answered 404" in message
    capped = ok(await call(client, "http_get", url=f"{base}/files/blob.bin", max_bytes=100))
    assert capped["truncated"]
    assert capped["bytes"] == 100


async def test_http_download_and_upload_a_file(client: Client, base: str, tmp_path: Path) -> None:
    target = tmp_path / "blob.bin"
    got = ok(await call(client, "http_download", url=f"{base}/files/blob.bin", path=str(target)))
    assert target.read_bytes() == bytes(range(256)) * 40
    assert got["sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()
    assert got["bytes"] == 10240
    assert "exists" in err(await call(client, "http_download", url=f"{base}/files/blob.bin", path=str(target)))
    small = tmp_path / "small.bin"
    assert "larger than" in err(await call(client, "http_download", url=f"{base}/files/blob.bin", path=str(small),
                                           max_bytes=1000))  # fmt: skip
    assert not small.exists()
    assert not small.with_name("small.bin.part").exists()
    up = ok(await call(client, "http_upload", url=f"{base}/upload", path=str(target), fields={"note": "hi"},
                       content_type="application/x-test"))  # fmt: skip
    assert up["json"] == {"filename": "blob.bin", "size": 10240, "fields": {"note": "hi"},
                          "content_type": "application/x-test"}  # fmt: skip
    assert "no file" in err(await call(client, "http_upload", url=f"{base}/upload", path=str(tmp_path / "nope")))


async def test_http_download_defaults_to_the_data_folder(
    client: Client, base: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HANZO_API_DATA_DIR", str(tmp_path / "data"))
    got = ok(await call(client, "http_download", url=f"{base}/files/blob.bin?v=1"))
    assert got["path"] == str(tmp_path / "data" / "downloads" / "blob.bin")
    assert got["contentType"] == "application/octet-stream"
    assert (tmp_path / "data" / "downloads" / "blob.bin").stat().st_size == 10240


async def test_http_paginate_follows_links_pages_and_cursors(client: Client, base: str) -> None:
    linked = ok(await call(client, "http_paginate", url=f"{base}/api/items", strategy="link", items_path="[*].id"))
    assert linked["items"] == [1, 2, 3, 4, 5, 6, 7]
    assert linked["pages"] == 3
    paged = ok(await call(client, "http_paginate", url=f"{base}/api/items", strategy="page", page_size=2,
                          items_path="[*].name", max_pages=10))  # fmt: skip
    assert paged["items"][:3] == ["item1", "item2", "item3"]
    assert paged["itemCount"] >= 7
    cursor = ok(await call(client, "http_paginate", url=f"{base}/api/cursor-items", strategy="cursor",
                           page_param="cursor", items_path="data", cursor_path="meta.next"))  # fmt: skip
    assert cursor["items"][:7] == [1, 2, 3, 4, 5, 6, 7]
    assert cursor["pages"] == 4
    assert "cursor_path" in err(await call(client, "http_paginate", url=f"{base}/api/items", strategy="cursor"))


async def test_http_bad_input_is_an_error_not_a_crash(client: Client, base: str) -> None:
    assert "cannot connect" in err(await call(client, "http_get", url="http://127.0.0.1:9/"))
    assert err(await call(client, "http_get", url="ftp://nope"))
    assert "either json or body" in err(await call(client, "http_post", url=f"{base}/echo", json={}, body="x"))
    assert "did not select a list" in err(await call(client, "http_paginate", url=f"{base}/api/items/1"))


# --- OpenAPI ------------------------------------------------------------------------------------------------------


async def test_openapi_load_list_and_describe(client: Client, base: str) -> None:
    spec = f"{base}/openapi.json"
    loaded = ok(await call(client, "openapi_load", spec=spec, refresh=True))
    assert loaded["title"] == "Items API"
    assert loaded["operations"] == 4
    assert loaded["valid"]
    ops = ok(await call(client, "openapi_list_operations", spec=spec, tag="items"))
    assert {r[0] for r in ops["rows"]} == {"listItems", "createItem", "getItem"}
    described = ok(await call(client, "openapi_describe_operation", spec=spec, operation_id="getItem"))
    assert described["parameters"][0]["name"] == "id"
    assert described["parameters"][0]["required"]
    schema = described["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["id", "name", "price"]
    by_path = ok(await call(client, "openapi_describe_operation", spec=spec, method="post", path="/items"))
    assert by_path["operationId"] == "createItem"
    assert "no operation" in err(await call(client, "openapi_describe_operation", spec=spec, operation_id="nope"))


async def test_openapi_schemas_and_security(client: Client, base: str, tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC))
    schemas = ok(await call(client, "openapi_list_schemas", spec=str(spec_file)))
    assert [r[0] for r in schemas["rows"]] == ["Item", "NewItem"]
    item = ok(await call(client, "openapi_get_schema", spec=str(spec_file), name="NewItem"))
    assert item["schema"]["required"] == ["name", "price"]
    assert "no schema" in err(await call(client, "openapi_get_schema", spec=str(spec_file), name="Ghost"))
    security = ok(await call(client, "openapi_security_schemes", spec=f"{base}/openapi.json"))
    rows = {r[0]: r for r in security["rows"]}
    assert rows["apiKey"][3] == "header:X-API-Key"
    assert "clientCredentials:/oauth/token" in rows["oauth"][3]
    assert security["security"] == [{"bearer": []}]


async def test_openapi_validate_spec_finds_real_errors(client: Client) -> None:
    good = ok(await call(client, "openapi_validate_spec", spec=json.dumps(SPEC)))
    assert good["valid"]
    assert good["errors"] == []
    bad = {
        "openapi": "3.0.3",
        "info": {"title": "x"},
        "paths": {
            "/a": {
                "get": {
                    "responses": {
                        "200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/nowhere"}}}}
                    }
                }
            }
        },
    }
    result = ok(await call(client, "openapi_validate_spec", spec=json.dumps(bad)))
    assert not result["valid"]
    messages = " ".join(e["message"] for e in result["errors"])
    assert "'version' is a required property" in messages
    assert "$ref" in messages
    yaml_spec = "openapi: 3.0.3\ninfo: {title: y, version: '1'}\npaths: {}\n"
    assert ok(await call(client, "openapi_validate_spec", spec=yaml_spec))["valid"]
    assert "not an OpenAPI document" in err(await call(client, "openapi_list_operations", spec='{"a": 1}'))


async def test_openapi_validate_request_and_response(client: Client, base: str) -> None:
    spec = f"{base}/openapi.json"
    good = ok(await call(client, "openapi_validate_request", spec=spec, method="post", path="/items",
                         body={"name": "a", "price": 2}, headers=AUTH))  # fmt: skip
    assert good["valid"], good
    anonymous = ok(await call(client, "openapi_validate_request", spec=spec, method="post", path="/items",
                              body={"name": "a", "price": 2}))  # fmt: skip
    assert not anonymous["valid"]
    assert "Security" in json.dumps(anonymous["errors"])
    bad = ok(await call(client, "openapi_validate_request", spec=spec, method="post", path="/items",
                        body={"name": "a", "price": -1}, headers=AUTH))  # fmt: skip
    assert not bad["valid"]
    assert "minimum" in json.dumps(bad["errors"])
    wrong_path = ok(await call(client, "openapi_validate_request", spec=spec, method="get", path="/items/abc",
                               headers=AUTH))  # fmt: skip
    assert not wrong_path["valid"]
    resp = ok(await call(client, "openapi_validate_response", spec=spec, method="get", path="/items/1", status=200,
                         body={"id": 1, "name": "a", "price": 1.0}))  # fmt: skip
    assert resp["valid"], resp
    bad_resp = ok(await call(client, "openapi_validate_response", spec=spec, method="get", path="/items/1",
                             status=200, body={"id": "x", "name": "a", "price": 1.0}))  # fmt: skip
    assert not bad_resp["valid"]
    assert "is not of type 'integer'" in json.dumps(bad_resp["errors"])


async def test_openapi_call_sends_and_checks_the_response(client: Client, base: str) -> None:
    spec = f"{base}/openapi.json"
    got = ok(await call(client, "openapi_call", spec=spec, operation_id="getItem", path_params={"id": 3},
                         headers=AUTH))  # fmt: skip
    assert got["status"] == 200
    assert got["json"]["name"] == "item3"
    assert got["responseValid"]
    created = ok(await call(client, "openapi_call", spec=spec, operation_id="createItem",
                            body={"name": "via-spec", "price": 4}, headers=AUTH))  # fmt: skip
    assert created["status"] == 201
    assert created["json"]["name"] == "via-spec"
    assert created["responseValid"]
    broken = ok(await call(client, "openapi_call", spec=spec, operation_id="getBroken", headers=AUTH))
    assert not broken["responseValid"]
    assert broken["responseErrors"]
    refused = err(await call(client, "openapi_call", spec=spec, operation_id="createItem", body={"name": ""},
                              headers=AUTH))  # fmt: skip
    assert "does not match createItem" in refused
    assert "path parameters missing" in err(await call(client, "openapi_call", spec=spec, operation_id="getItem"))
    unvalidated = ok(await call(client, "openapi_call", spec=spec, operation_id="getItem", path_params={"id": 1},
                                validate_request=False))  # fmt: skip
    assert unvalidated["status"] == 200


# --- GraphQL ------------------------------------------------------------------------------------------------------


async def test_graphql_introspect_types_and_describe(client: Client, base: str) -> None:
    url = f"{base}/graphql"
    intro = ok(await call(client, "graphql_introspect", url=url, refresh=True))
    assert "type Item" in intro["sdl"]
    assert intro["roots"] == {"query": "Query", "mutation": "Mutation", "subscription": None}
    types = ok(await call(client, "graphql_list_types", url=url, kind="OBJECT"))
    assert {r[0] for r in types["rows"]} == {"Item", "Query", "Mutation"}
    query_type = ok(await call(client, "graphql_describe_type", url=url, name="Query"))
    fields = {f["name"]: f for f in query_type["fields"]}
    assert fields["item"]["args"][0] == {"name": "id", "type": "Int!", "default": None}
    assert fields["items"]["args"][0]["default"] == "10"
    assert "did you mean" in err(await call(client, "graphql_describe_type", url=url, name="item"))


async def test_graphql_build_validate_query_and_mutate(client: Client, base: str) -> None:
    url = f"{base}/graphql"
    built = ok(await call(client, "graphql_build_query", url=url, field="item"))
    assert built["valid"]
    assert "$id: Int!" in built["document"]
    assert "price" in built["document"]
    data = ok(await call(client, "graphql_query", url=url, query=built["document"], variables={"id": 2}))
    assert data["data"]["item"]["name"] == "item2"
    assert data["errors"] == []
    valid = ok(await call(client, "graphql_validate", url=url, query="{ items { id nope } }"))
    assert not valid["valid"]
    assert "Cannot query field 'nope'" in valid["errors"][0]["message"]
    syntax = ok(await call(client, "graphql_validate", url=url, query="{ items { id "))
    assert not syntax["valid"]
    mutation = "mutation Add($n: String!) { addItem(name: $n, price: 2.5) { id name price } }"
    added = ok(await call(client, "graphql_mutate", url=url, mutation=mutation, variables={"n": "gql"}))
    assert added["data"]["addItem"]["name"] == "gql"
    assert "graphql_mutate" in err(await call(client, "graphql_query", url=url, query=mutation))
    assert "no mutation" in err(await call(client, "graphql_mutate", url=url, mutation="{ hello }"))
    partial = ok(await call(client, "graphql_query", url=url, query="query($i: Int!) { item(id: $i) { id } }"))
    assert partial["errors"]
    assert partial["data"] is None


# --- OAuth2 and JWT -----------------------------------------------------------------------------------------------


async def test_oauth2_client_credentials_refresh_and_introspect(
    client: Client, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_API_CLIENT_SECRET", CLIENT_SECRET)
    token = ok(await call(client, "oauth2_client_credentials", token_url=f"{base}/oauth/token", client_id=CLIENT_ID,
                          client_secret_env="TEST_API_CLIENT_SECRET", scope="items:read"))  # fmt: skip
    assert token["token_type"] == "Bearer"
    assert token["accessTokenClaims"]["grant"] == "client_credentials"
    body_auth = ok(await call(client, "oauth2_client_credentials", token_url=f"{base}/oauth/token",
                              client_id=CLIENT_ID, client_secret=CLIENT_SECRET, client_auth="body"))  # fmt: skip
    assert body_auth["access_token"]
    refreshed = ok(await call(client, "oauth2_refresh", token_url=f"{base}/oauth/token", client_id=CLIENT_ID,
                              client_secret=CLIENT_SECRET, refresh_token=token["refresh_token"]))  # fmt: skip
    assert refreshed["refresh_token"] == "r2"
    assert refreshed["accessTokenClaims"]["grant"] == "refresh_token"
    active = ok(
        await call(
            client,
            "oauth2_introspect",
            introspection_url=f"{base}/oauth/introspect",
            token=refreshed["access_token"],
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
        )
    )
    assert active["active"]
    assert active["sub"] == CLIENT_ID
    assert not active["expired"]
    inactive = ok(await call(client, "oauth2_introspect", introspection_url=f"{base}/oauth/introspect",
                             token="garbage", client_id=CLIENT_ID, client_secret=CLIENT_SECRET))  # fmt: skip
    assert inactive["active"] is False
    denied = err(await call(client, "oauth2_client_credentials", token_url=f"{base}/oauth/token",
                            client_id=CLIENT_ID, client_secret="wrong"))  # fmt: skip
    assert "401" in denied
    assert "bad client credentials" in denied
    assert "not set" in err(
        await call(
            client,
            "oauth2_client_credentials",
            token_url=f"{base}/oauth/token",
            client_id=CLIENT_ID,
            client_secret_env="TEST_API_UNSET_VARIABLE",
        )
    )
    assert "unknown refresh token" in err(await call(client, "oauth2_refresh", token_url=f"{base}/oauth/token",
                                                     client_id=CLIENT_ID, client_secret=CLIENT_SECRET,
                                                     refresh_token="stale"))  # fmt: skip


async def test_jwt_sign_decode_verify(client: Client) -> None:
    signed = ok(await call(client, "jwt_sign", claims={"sub": "u1", "aud": "api"}, key=TOKEN_KEY, expires_in=60,
                           headers={"kid": "k1"}))  # fmt: skip
    assert jwt.decode(signed["token"], TOKEN_KEY, algorithms=["HS256"], audience="api")["sub"] == "u1"
    decoded = ok(await call(client, "jwt_decode", token=signed["token"]))
    assert decoded["header"]["kid"] == "k1"
    assert decoded["claims"]["sub"] == "u1"
    assert 0 < decoded["secondsLeft"] <= 60
    good = ok(await call(client, "jwt_verify", token=signed["token"], algorithms=["HS256"], key=TOKEN_KEY,
                         audience="api"))  # fmt: skip
    assert good["valid"]
    assert good["claims"]["aud"] == "api"
    wrong = ok(await call(client, "jwt_verify", token=signed["token"], algorithms=["HS256"], key="other-key-" * 4,
                          audience="api"))  # fmt: skip
    assert not wrong["valid"]
    assert "Signature" in wrong["reason"]
    expired = jwt.encode({"sub": "u", "exp": int(time.time()) - 100}, TOKEN_KEY, algorithm="HS256")
    assert (
        "Expired" in ok(await call(client, "jwt_verify", token=expired, algorithms=["HS256"], key=TOKEN_KEY))["reason"]
    )
    assert "not a decodable JWT" in err(await call(client, "jwt_decode", token="not.a.jwt-at-all"))
    assert "key is needed" in err(await call(client, "jwt_sign", claims={"a": 1}))


# --- webhooks -----------------------------------------------------------------------------------------------------


async def test_webhook_capture_sign_and_verify(client: Client) -> None:
    started = ok(await call(client, "webhook_listen", response_status=202, response_body="thanks"))
    receiver, url = started["receiverId"], started["url"]
    try:
        body = json.dumps({"event": "push", "n": 1})
        headers = ok(await call(client, "webhook_sign", body=body, secret_value="whk", scheme="github"))["headers"]
        sent = ok(await call(client, "http_post", url=url + "hooks/github", body=body,
                             headers={**headers, "Content-Type": "application/json"}))  # fmt: skip
        assert sent["status"] == 202
        assert sent["text"] == "thanks"
        captured = ok(await call(client, "webhook_requests", receiver_id=receiver, min_count=1, wait_seconds=5))
        assert captured["count"] == 1
        assert captured["requests"][0]["path"] == "/hooks/github"
        assert captured["requests"][0]["json"] == {"event": "push", "n": 1}
        assert ok(await call(client, "webhook_verify", receiver_id=receiver, secret_value="whk"))["valid"]
        forged = ok(await call(client, "webhook_verify", receiver_id=receiver, secret_value="other"))
        assert not forged["valid"]
        assert "does not match" in forged["reason"]
        for scheme in ("hex", "stripe", "slack", "standard"):
            key = "whsec_" + "c2VjcmV0LWtleQ==" if scheme == "standard" else "k"
            signed = ok(await call(client, "webhook_sign", body=body, secret_value=key, scheme=scheme))["headers"]
            check = ok(await call(client, "webhook_verify", body=body, headers=signed, secret_value=key, scheme=scheme))
            assert check["valid"], (scheme, check)
            tampered = ok(await call(client, "webhook_verify", body=body + " ", headers=signed, secret_value=key,
                                     scheme=scheme))  # fmt: skip
            assert not tampered["valid"], scheme
        old = ok(await call(client, "webhook_sign", body=body, secret_value="k", scheme="stripe", timestamp=1000))
        replay = ok(await call(client, "webhook_verify", body=body, headers=old["headers"], secret_value="k",
                               scheme="stripe"))  # fmt: skip
        assert not replay["valid"]
        assert "tolerance" in replay["reason"]
        assert "must be base64" in err(await call(client, "webhook_sign", body=body, secret_value="whsec_***",
                                                  scheme="standard"))  # fmt: skip
        assert "not a unix time" in err(
            await call(
                client,
                "webhook_verify",
                body=body,
                secret_value="k",
                scheme="slack",
                headers={"X-Slack-Signature": "v0=00", "X-Slack-Request-Timestamp": "soon"},
            )
        )
        cleared = ok(await call(client, "webhook_requests", receiver_id=receiver, clear=True))
        assert cleared["count"] == 1
        assert ok(await call(client, "webhook_requests", receiver_id=receiver))["count"] == 0
    finally:
        stopped = ok(await call(client, "webhook_stop", receiver_id=receiver))
    assert stopped["stopped"]
    assert "no webhook receiver" in err(await call(client, "webhook_requests", receiver_id=receiver))
    assert "no webhook receiver" in err(await call(client, "webhook_verify", receiver_id="wh-none", secret_value="k"))
    unsigned = ok(await call(client, "webhook_verify", body="{}", headers={"X-Other": "1"}, secret_value="k"))
    assert not unsigned["valid"]
    assert "no github signature header" in unsigned["reason"]


# --- JSON ---------------------------------------------------------------------------------------------------------


async def test_json_query_jq_and_validate(client: Client) -> None:
    data = {"items": [{"name": "a", "price": 5}, {"name": "b", "price": 15}, {"name": "c", "price": 25}]}
    assert ok(await call(client, "json_query", data=data, expression="items[?price > `10`].name"))["result"] == [
        "b", "c"]  # fmt: skip
    jq_out = ok(await call(client, "json_jq", data=data, program="[.items[].price] | add"))
    assert jq_out["outputs"] == [45]
    assert ok(await call(client, "json_jq", data=data, program=".items[].name", max_outputs=2))["outputs"] == ["a", "b"]
    schema = {
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"price": {"type": "integer", "maximum": 20}}},
            }
        },
    }
    result = ok(await call(client, "json_validate", data=data, schema=schema))
    assert not result["valid"]
    assert result["errors"][0]["path"] == "/items/2/price"
    assert result["errors"][0]["keyword"] == "maximum"
    assert ok(await call(client, "json_validate", data={"items": []}, schema=schema))["valid"]
    assert "bad JMESPath" in err(await call(client, "json_query", data=data, expression="items[?"))
    assert "does not compile" in err(await call(client, "json_jq", data=data, program=".items[ |"))
    assert "schema itself is invalid" in err(await call(client, "json_validate", data=1, schema={"type": 12}))


async def test_json_diff_convert_flatten_and_infer(client: Client) -> None:
    diff = ok(await call(client, "json_diff", before={"a": 1, "b": [1, 2], "c": "x"}, after={"a": 2, "b": [1, 2, 3]}))
    kinds = {c["kind"] for c in diff["changes"]}
    assert not diff["equal"]
    assert {"values_changed", "iterable_item_added", "dictionary_item_removed"} <= kinds
    assert ok(await call(client, "json_diff", before=[1, 2], after=[2, 1], ignore_order=True))["equal"]
    converted = ok(await call(client, "json_convert", text="a: 1\nb: [x, y]\n", source="yaml", target="json"))
    assert converted["value"] == {"a": 1, "b": ["x", "y"]}
    to_yaml = ok(await call(client, "json_convert", text='[tool]\nname = "t"\n', source="toml", target="yaml"))
    assert "name: t" in to_yaml["text"]
    assert "not valid json" in err(await call(client, "json_convert", text="{", source="json", target="yaml"))
    flat = ok(await call(client, "json_flatten", data={"a": {"b": [1, {"c": 2}]}, "d": None}))["flat"]
    assert flat == {"a.b.0": 1, "a.b.1.c": 2, "d": None}
    assert ok(await call(client, "json_unflatten", flat=flat))["data"] == {"a": {"b": [1, {"c": 2}]}, "d": None}
    assert "collides" in err(await call(client, "json_unflatten", flat={"a.b": 1, "a": 2}))
    schema = ok(await call(client, "json_infer_schema", examples=[{"id": 1, "tags": ["x"]}, {"id": 2, "x": 1.5}]))
    inferred = schema["schema"]
    assert inferred["required"] == ["id"]
    assert inferred["properties"]["tags"]["items"]["type"] == "string"
    assert inferred["properties"]["x"]["type"] == "number"
