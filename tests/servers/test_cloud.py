"""The ``cloud`` server against a real moto server (``python -m moto.server`` on a loopback port), over MCP."""

from __future__ import annotations

import base64
import io
import json
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import boto3  # type: ignore[import-untyped]
import pytest

from servers.cloud import _aws
from servers.cloud.server import mcp
from tests.servers.conftest import Client, err, ok, text

pytestmark = pytest.mark.anyio
READY_TIMEOUT = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto server subprocess; the AWS environment points at it as the hub's vault would at launch."""
    port = _free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto server did not start: {Path(log.name).read_text()[-2000:]}") from None
            time.sleep(0.1)
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("aws")
        for name, value in {
            "AWS_ENDPOINT_URL": url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": str(home / "config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "credentials"),
        }.items():
            mp.setenv(name, value)
        mp.delenv("AWS_PROFILE", raising=False)
        mp.delenv("AWS_SESSION_TOKEN", raising=False)
        _aws.reset_clients()
        try:
            yield url
        finally:
            _aws.reset_clients()
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            log.close()


@pytest.fixture
async def client(endpoint: str) -> AsyncIterator[Client]:
    async with Client(mcp) as c:
        yield c


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return ok(await client.call_tool(tool, args))


async def fail(client: Client, tool: str, **args: Any) -> str:
    return err(await client.call_tool(tool, args))


def http(request: urllib.request.Request) -> bytes:
    """A plain HTTP client (what a presigned URL is for), run off the event loop."""
    with urllib.request.urlopen(request, timeout=10) as response:
        body: bytes = response.read()
        return body


def boto(service: str) -> Any:
    """A test-side client for setting up what the server has no tool for (IAM users, Lambda functions)."""
    return boto3.client(service, region_name="us-east-1")


async def test_server_lists_at_least_35_annotated_tools(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) >= 35
    for tool in tools:
        assert tool.annotations is not None, tool.name
        assert tool.annotations.read_only_hint is not None, tool.name
        assert len(tool.description or "") > 40, tool.name


async def test_s3_bucket_lifecycle_objects_and_presign(client: Client) -> None:
    await call(client, "s3_create_bucket", bucket="reports")
    await call(client, "s3_create_bucket", bucket="archive-eu", region="eu-west-1")
    names = [r[0] for r in (await call(client, "s3_list_buckets"))["rows"]]
    assert {"reports", "archive-eu"} <= set(names)

    put = await call(
        client,
        "s3_put_object",
        bucket="reports",
        key="2024/q1.csv",
        content="a,b\n1,2\n",
        content_type="text/csv",
        metadata={"owner": "ana"},
    )
    assert put["size"] == 8
    assert put["etag"]
    png = bytes(range(255, -1, -1))  # starts with 0xff: not UTF-8
    await call(
        client,
        "s3_put_object",
        bucket="reports",
        key="2024/img.bin",
        content=base64.b64encode(png).decode(),
        encoding="base64",
    )
    await call(client, "s3_put_object", bucket="reports", key="top.txt", content="hello")

    listed = await call(client, "s3_list_objects", bucket="reports", prefix="2024/")
    assert sorted(r[0] for r in listed["rows"]) == ["2024/img.bin", "2024/q1.csv"]
    folders = await call(client, "s3_list_objects", bucket="reports", delimiter="/")
    assert folders["prefixes"] == ["2024/"]
    assert [r[0] for r in folders["rows"]] == ["top.txt"]
    page = await call(client, "s3_list_objects", bucket="reports", max_keys=1)
    assert page["rowCount"] == 1
    assert page["continuationToken"]

    got = await call(client, "s3_get_object", bucket="reports", key="2024/q1.csv")
    assert got["content"] == "a,b\n1,2\n"
    assert got["encoding"] == "text"
    assert got["metadata"] == {"owner": "ana"}
    binary = await call(client, "s3_get_object", bucket="reports", key="2024/img.bin", max_bytes=16)
    assert binary["encoding"] == "base64"
    assert base64.b64decode(binary["content"]) == png[:16]
    assert binary["truncated"] is True
    assert binary["size"] == 256

    head = await call(client, "s3_head_object", bucket="reports", key="2024/q1.csv")
    assert head["size"] == 8
    assert head["contentType"] == "text/csv"

    await call(
        client,
        "s3_copy_object",
        source_bucket="reports",
        source_key="top.txt",
        dest_bucket="archive-eu",
        dest_key="copy.txt",
    )
    assert (await call(client, "s3_get_object", bucket="archive-eu", key="copy.txt"))["content"] == "hello"

    presigned = await call(client, "s3_presign_url", bucket="reports", key="top.txt")
    assert await anyio.to_thread.run_sync(http, urllib.request.Request(presigned["url"])) == b"hello"
    upload = await call(client, "s3_presign_url", bucket="reports", key="up.txt", method="put", expires_seconds=60)
    request = urllib.request.Request(
        upload["url"], data=b"via presigned put", method="PUT", headers={"Content-Type": "text/plain"}
    )
    await anyio.to_thread.run_sync(http, request)
    assert (await call(client, "s3_get_object", bucket="reports", key="up.txt"))["content"] == "via presigned put"

    deleted = await call(client, "s3_delete_objects", bucket="reports", keys=["top.txt", "up.txt"])
    assert sorted(deleted["deleted"]) == ["top.txt", "up.txt"]
    assert "NoSuchKey" in await fail(client, "s3_get_object", bucket="reports", key="top.txt")
    assert "404" in await fail(client, "s3_head_object", bucket="reports", key="top.txt")

    assert "BucketNotEmpty" in await fail(client, "s3_delete_bucket", bucket="reports")
    gone = await call(client, "s3_delete_bucket", bucket="reports", force=True)
    assert gone["objectsDeleted"] == 2
    assert "reports" not in [r[0] for r in (await call(client, "s3_list_buckets"))["rows"]]


async def test_s3_versioning_and_tags(client: Client) -> None:
    await call(client, "s3_create_bucket", bucket="versioned")
    info = await call(client, "s3_bucket_info", bucket="versioned")
    assert info == {"bucket": "versioned", "region": "us-east-1", "versioning": "Disabled", "tags": {}}
    await call(client, "s3_set_bucket_versioning", bucket="versioned", status="Enabled")
    first = await call(client, "s3_put_object", bucket="versioned", key="k", content="one")
    await call(client, "s3_put_object", bucket="versioned", key="k", content="two")
    old = await call(client, "s3_get_object", bucket="versioned", key="k", version_id=first["versionId"])
    assert old["content"] == "one"
    assert (await call(client, "s3_get_object", bucket="versioned", key="k"))["content"] == "two"
    await call(client, "s3_set_bucket_tags", bucket="versioned", tags={"team": "data", "env": "dev"})
    info = await call(client, "s3_bucket_info", bucket="versioned")
    assert info["versioning"] == "Enabled"
    assert info["tags"] == {"team": "data", "env": "dev"}
    await call(client, "s3_set_bucket_tags", bucket="versioned", tags={})
    assert (await call(client, "s3_bucket_info", bucket="versioned"))["tags"] == {}
    assert (await call(client, "s3_delete_bucket", bucket="versioned", force=True))["objectsDeleted"] == 2


async def test_s3_bad_arguments_are_errors(client: Client) -> None:
    assert "NoSuchBucket" in await fail(client, "s3_list_objects", bucket="no-such-bucket")
    assert "bucket" in await fail(client, "s3_create_bucket", bucket="Bad_Name")
    await call(client, "s3_create_bucket", bucket="b64")
    assert "base64" in await fail(client, "s3_put_object", bucket="b64", key="x", content="%%%", encoding="base64")
    assert "method" in await fail(client, "s3_presign_url", bucket="b64", key="x", method="delete")


async def test_dynamodb_tables_and_items(client: Client) -> None:
    created = await call(
        client,
        "dynamodb_create_table",
        table="orders",
        partition_key="customer",
        sort_key="order_no",
        sort_key_type="N",
    )
    assert created["status"] in {"CREATING", "ACTIVE"}
    await call(client, "dynamodb_create_table", table="users", partition_key="id")
    assert {"orders", "users"} <= set((await call(client, "dynamodb_list_tables"))["tables"])
    described = await call(client, "dynamodb_describe_table", table="orders")
    assert described["keySchema"] == {"hash": "customer", "range": "order_no"}
    assert described["attributeTypes"] == {"customer": "S", "order_no": "N"}

    for n in range(1, 6):
        item = {"customer": "ana", "order_no": n, "total": n * 1.5, "tags": ["a", "b"], "paid": n % 2 == 0}
        await call(client, "dynamodb_put_item", table="orders", item=item)
    await call(client, "dynamodb_put_item", table="orders", item={"customer": "bo", "order_no": 1, "total": 9})
    got = await call(client, "dynamodb_get_item", table="orders", key={"customer": "ana", "order_no": 2})
    assert got["item"] == {"customer": "ana", "order_no": 2, "total": 3.0, "tags": ["a", "b"], "paid": True}
    assert (await call(client, "dynamodb_get_item", table="orders", key={"customer": "zed", "order_no": 1}))[
        "found"
    ] is False

    await call(client, "dynamodb_put_item", table="users", item={"id": "u1", "name": "Ana"}, only_if_absent=True)
    assert "ConditionalCheckFailed" in await fail(
        client, "dynamodb_put_item", table="users", item={"id": "u1", "name": "Other"}, only_if_absent=True
    )

    updated = await call(
        client,
        "dynamodb_update_item",
        table="orders",
        key={"customer": "ana", "order_no": 1},
        set_attributes={"status": "shipped", "total": 2},
        remove_attributes=["tags"],
    )
    assert updated["item"] == {"customer": "ana", "order_no": 1, "total": 2, "status": "shipped", "paid": False}

    query = await call(
        client,
        "dynamodb_query",
        table="orders",
        partition_key="customer",
        partition_value="ana",
        sort_key="order_no",
        sort_op="between",
        sort_value=2,
        sort_value2=4,
        descending=True,
    )
    assert [i["order_no"] for i in query["items"]] == [4, 3, 2]
    assert query["nextKey"] is None
    paged = await call(
        client, "dynamodb_query", table="orders", partition_key="customer", partition_value="ana", limit=2
    )
    assert paged["rowCount"] == 2
    assert paged["nextKey"] == {"customer": "ana", "order_no": 2}
    rest = await call(
        client,
        "dynamodb_query",
        table="orders",
        partition_key="customer",
        partition_value="ana",
        start_key=paged["nextKey"],
    )
    assert [i["order_no"] for i in rest["items"]] == [3, 4, 5]

    scan = await call(client, "dynamodb_scan", table="orders", equals={"paid": True})
    assert sorted(i["order_no"] for i in scan["items"]) == [2, 4]
    assert (await call(client, "dynamodb_scan", table="orders"))["rowCount"] == 6

    removed = await call(client, "dynamodb_delete_item", table="orders", key={"customer": "bo", "order_no": 1})
    assert removed["existed"] is True
    assert removed["item"]["total"] == 9
    again = await call(client, "dynamodb_delete_item", table="orders", key={"customer": "bo", "order_no": 1})
    assert again["existed"] is False


async def test_dynamodb_bad_arguments_are_errors(client: Client) -> None:
    assert "ResourceNotFound" in await fail(client, "dynamodb_describe_table", table="missing")
    await call(client, "dynamodb_create_table", table="things", partition_key="id")
    assert "nothing to update" in await fail(client, "dynamodb_update_item", table="things", key={"id": "x"})
    assert "sort_value2" in await fail(
        client,
        "dynamodb_query",
        table="things",
        partition_key="id",
        partition_value="x",
        sort_key="s",
        sort_op="between",
        sort_value=1,
    )
    assert "ValidationException" in await fail(client, "dynamodb_get_item", table="things", key={"wrong": "x"})


async def test_ec2_instances_images_groups_and_vpcs(client: Client) -> None:
    images = await call(client, "ec2_describe_images", owners=["amazon"], limit=5)
    assert images["rowCount"] == 5
    assert images["total"] >= 5
    assert all(r[0].startswith("ami-") for r in images["rows"])
    image_id = images["rows"][0][0]
    named = await call(client, "ec2_describe_images", image_ids=[image_id])
    assert [r[0] for r in named["rows"]] == [image_id]

    vpcs = await call(client, "ec2_describe_vpcs")
    default = [r for r in vpcs["rows"] if r[3]]
    assert default
    assert default[0][1]
    groups = await call(client, "ec2_describe_security_groups", vpc_id=default[0][0])
    assert "default" in [r[1] for r in groups["rows"]]

    launched = await call(client, "ec2_run_instances", image_id=image_id, count=2, tags={"Name": "web", "env": "dev"})
    ids = [r[0] for r in launched["rows"]]
    assert len(ids) == 2
    assert all(r[6] == "web" for r in launched["rows"])
    tagged = await call(client, "ec2_describe_instances", tags={"env": "dev"})
    assert sorted(r[0] for r in tagged["rows"]) == sorted(ids)

    stopped = await call(client, "ec2_stop_instances", instance_ids=ids[:1])
    assert stopped["rows"][0][0] == ids[0]
    assert stopped["rows"][0][2] in {"stopping", "stopped"}
    only_stopped = await call(client, "ec2_describe_instances", states=["stopped"], instance_ids=ids)
    assert [r[0] for r in only_stopped["rows"]] == ids[:1]
    started = await call(client, "ec2_start_instances", instance_ids=ids[:1])
    assert started["rows"][0][2] in {"pending", "running"}
    terminated = await call(client, "ec2_terminate_instances", instance_ids=ids)
    assert {r[2] for r in terminated["rows"]} <= {"shutting-down", "terminated"}

    assert "InvalidInstanceID" in await fail(client, "ec2_stop_instances", instance_ids=["i-0123456789abcdef0"])
    assert "instance_ids" in await fail(client, "ec2_terminate_instances", instance_ids=["not-an-id"])
    assert "image_id" in await fail(client, "ec2_run_instances", image_id="ubuntu")


async def test_iam_sts_and_lambda_listing(client: Client) -> None:
    iam = boto("iam")
    statement = {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    trust = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    role = iam.create_role(RoleName="fn-role", AssumeRolePolicyDocument=trust, Path="/service-role/")["Role"]
    iam.create_user(UserName="ana", Path="/engineering/")
    iam.create_user(UserName="bo")

    roles = await call(client, "iam_list_roles", path_prefix="/service-role/")
    assert [r[0] for r in roles["rows"]] == ["fn-role"]
    assert "lambda.amazonaws.com" in roles["rows"][0][4]
    assert [r[0] for r in (await call(client, "iam_list_users", path_prefix="/engineering/"))["rows"]] == ["ana"]
    assert {"ana", "bo"} <= {r[0] for r in (await call(client, "iam_list_users"))["rows"]}
    assert "path_prefix" in await fail(client, "iam_list_users", path_prefix="no-slashes")

    identity = await call(client, "sts_get_caller_identity")
    assert identity["account"].isdigit()
    assert identity["arn"].startswith("arn:aws:")

    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("app.py", "def handler(event, context):\n    return event\n")
    boto("lambda").create_function(
        FunctionName="echo",
        Runtime="python3.12",
        Role=role["Arn"],
        Handler="app.handler",
        Code={"ZipFile": archive.getvalue()},
        Description="echoes its event",
        MemorySize=256,
    )
    functions = await call(client, "lambda_list_functions")
    assert functions["rows"][0][:4] == ["echo", "python3.12", "app.handler", 256]


async def test_ssm_parameters_hide_secure_values(client: Client) -> None:
    await call(client, "ssm_put_parameter", name="/app/db/host", value="db.internal", description="db host")
    put = await call(client, "ssm_put_parameter", name="/app/db/password", value="s3cr3t!", type="SecureString")
    assert "s3cr3t!" not in str(put)
    assert put["version"] == 1
    assert "ParameterAlreadyExists" in await fail(client, "ssm_put_parameter", name="/app/db/host", value="other")
    again = await call(client, "ssm_put_parameter", name="/app/db/host", value="db2.internal", overwrite=True)
    assert again["version"] == 2

    assert (await call(client, "ssm_get_parameter", name="/app/db/host"))["value"] == "db2.internal"
    hidden = await call(client, "ssm_get_parameter", name="/app/db/password")
    assert hidden["type"] == "SecureString"
    assert "s3cr3t!" not in str(hidden)
    assert "reveal" in hidden["value"]
    assert (await call(client, "ssm_get_parameter", name="/app/db/password", reveal=True))["value"] == "s3cr3t!"

    await call(client, "ssm_put_parameter", name="/other/x", value="1")
    listed = await call(client, "ssm_list_parameters", path_prefix="/app/")
    assert sorted(r[0] for r in listed["rows"]) == ["/app/db/host", "/app/db/password"]
    assert "s3cr3t!" not in str(listed)
    assert "ParameterNotFound" in await fail(client, "ssm_get_parameter", name="/missing")


async def test_secrets_are_returned_only_when_revealed(client: Client) -> None:
    created = await call(
        client,
        "secrets_create",
        name="prod/db",
        value='{"password":"hunter2"}',
        description="db login",
        tags={"env": "prod"},
    )
    assert created["arn"].startswith("arn:aws:secretsmanager:")
    assert "hunter2" not in str(created)
    await call(client, "secrets_create", name="dev/api", value="tok-123")
    assert "ResourceExists" in await fail(client, "secrets_create", name="prod/db", value="x")

    meta = await call(client, "secrets_get", secret_id="prod/db")
    assert meta["revealed"] is False
    assert "hunter2" not in str(meta)
    assert meta["description"] == "db login"
    result = await client.call_tool("secrets_get", {"secret_id": "prod/db"})
    assert "hunter2" not in text(result)
    revealed = await call(client, "secrets_get", secret_id="prod/db", reveal=True)
    assert revealed["value"] == '{"password":"hunter2"}'
    assert revealed["versionId"]

    listed = await call(client, "secrets_list", name_prefix="prod/")
    assert [r[0] for r in listed["rows"]] == ["prod/db"]
    assert listed["rows"][0][3] == {"env": "prod"}
    assert "hunter2" not in str(listed)
    assert "tok-123" not in str(await call(client, "secrets_list"))
    assert "ResourceNotFound" in await fail(client, "secrets_get", secret_id="nope")


async def test_kms_encrypt_decrypt_round_trip(client: Client) -> None:
    key = await call(client, "kms_create_key", description="app data", alias="alias/app-data")
    assert key["state"] == "Enabled"
    sealed = await call(client, "kms_encrypt", key_id="alias/app-data", plaintext="card 4242", context={"user": "ana"})
    assert "card 4242" not in sealed["ciphertext"]
    assert base64.b64decode(sealed["ciphertext"])
    opened = await call(client, "kms_decrypt", ciphertext=sealed["ciphertext"], context={"user": "ana"})
    assert opened["plaintext"] == "card 4242"
    assert key["keyId"] in opened["keyId"]
    assert "InvalidCiphertext" in await fail(
        client, "kms_decrypt", ciphertext=sealed["ciphertext"], context={"user": "bo"}
    )
    assert "base64" in await fail(client, "kms_decrypt", ciphertext="not base64 !!")
    assert "NotFound" in await fail(client, "kms_encrypt", key_id="alias/missing", plaintext="x")


async def test_sqs_and_sns_messaging(client: Client) -> None:
    queue = (await call(client, "sqs_create_queue", name="jobs", visibility_timeout_seconds=30))["queueUrl"]
    fifo = (await call(client, "sqs_create_queue", name="ordered.fifo"))["queueUrl"]
    sent = await call(client, "sqs_send_message", queue_url=queue, body="job-1", attributes={"kind": "resize"})
    assert sent["messageId"]
    await call(client, "sqs_send_message", queue_url=fifo, body="first", group_id="g", deduplication_id="d1")
    listed = await call(client, "sqs_list_queues", name_prefix="jobs")
    assert [(r[0], r[1]) for r in listed["rows"]] == [(queue, 1)]

    received = await call(client, "sqs_receive_messages", queue_url=queue, delete=True, wait_seconds=1)
    assert [(r[1], r[2]) for r in received["rows"]] == [("job-1", {"kind": "resize"})]
    assert received["deleted"] is True
    assert (await call(client, "sqs_receive_messages", queue_url=queue, wait_seconds=0))["rowCount"] == 0
    ordered = await call(client, "sqs_receive_messages", queue_url=fifo, wait_seconds=1)
    assert [r[1] for r in ordered["rows"]] == ["first"]

    topic = (await call(client, "sns_create_topic", name="alerts"))["topicArn"]
    assert (await call(client, "sns_create_topic", name="alerts"))["topicArn"] == topic
    inbox = (await call(client, "sqs_create_queue", name="alert-inbox"))["queueUrl"]
    inbox_arn = boto("sqs").get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    boto("sns").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"})
    topics = await call(client, "sns_list_topics")
    assert [topic, [f"sqs:{inbox_arn}"]] in topics["rows"]
    published = await call(client, "sns_publish", topic_arn=topic, message="disk full", subject="alert")
    assert published["messageId"]
    delivered = await call(client, "sqs_receive_messages", queue_url=inbox, wait_seconds=2, delete=True)
    assert [r[1] for r in delivered["rows"]] == ["disk full"]

    assert "NonExistentQueue" in await fail(client, "sqs_send_message", queue_url=f"{queue}-missing", body="x")
    assert "topic_arn" in await fail(client, "sns_publish", topic_arn="alerts", message="x")


async def test_cloudwatch_logs_groups_and_events(client: Client) -> None:
    await call(client, "logs_create_group", group="/app/web", retention_days=7)
    written = await call(
        client, "logs_put_events", group="/app/web", stream="host-1", messages=["GET / 200", "ERROR db down"]
    )
    assert written["written"] == 2
    await call(client, "logs_put_events", group="/app/web", stream="host-1", messages=["GET /health 200"])
    await call(client, "logs_put_events", group="/app/web", stream="host-2", messages=["ERROR disk full"])
    events = await call(client, "logs_get_events", group="/app/web")
    assert sorted(r[2] for r in events["rows"]) == ["ERROR db down", "ERROR disk full", "GET / 200", "GET /health 200"]
    errors = await call(client, "logs_get_events", group="/app/web", pattern="ERROR")
    assert sorted(r[2] for r in errors["rows"]) == ["ERROR db down", "ERROR disk full"]
    one = await call(client, "logs_get_events", group="/app/web", streams=["host-2"])
    assert [r[1:] for r in one["rows"]] == [["host-2", "ERROR disk full"]]
    assert "ResourceAlreadyExists" in await fail(client, "logs_create_group", group="/app/web")
    assert "ResourceNotFound" in await fail(client, "logs_put_events", group="/missing", stream="s", messages=["x"])
    assert "retention_days" in await fail(client, "logs_create_group", group="/app/x", retention_days=2)


async def test_unreachable_endpoint_is_a_clear_error(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    _aws.reset_clients()
    try:
        message = await fail(client, "s3_list_buckets")
    finally:
        monkeypatch.undo()
        _aws.reset_clients()
    assert "cannot reach the endpoint" in message
    assert "AWS_ENDPOINT_URL" in message
