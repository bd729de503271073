"""The awslabs IAM and SNS/SQS servers against a real ``moto_server`` on loopback (test AWS config files)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.catalog.live import services
from tests.catalog.live.helpers import Call, run_live, text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ACCOUNT = "123456789012"  # moto's default account


@pytest.fixture(scope="module")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.Aws]:
    with services.moto(tmp_path_factory.mktemp("moto")) as server:
        yield server


async def test_iam_groups_roles_and_policies(tmp_path: Path, aws: services.Aws) -> None:
    trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
    )
    statement = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::catalog-bucket/*"}
    policy = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    calls = [
        Call("create_group", {"group_name": "catalog-devs"}, "catalog-devs"),
        Call("list_groups", {}, "catalog-devs"),
        Call("create_role", {"role_name": "catalog-role", "assume_role_policy_document": trust}, "catalog-role"),
        Call("list_roles", {}, "catalog-role"),
        Call(
            "put_role_policy",
            {"role_name": "catalog-role", "policy_name": "s3-all", "policy_document": policy},
            "s3-all",
        ),
        Call("list_role_policies", {"role_name": "catalog-role"}, "s3-all"),
        Call("get_group", {"group_name": "catalog-devs"}, f"arn:aws:iam::{ACCOUNT}:group/catalog-devs"),
    ]
    outcome = await run_live(
        "aws-iam", tmp_path, calls, extra_args=["--allow-write", "--no-confirmation"], env=aws.env, call_timeout=60
    )
    names = {t.name for t in outcome.tools}
    assert not names & {"list_users", "get_user", "create_user"}  # hidden: they require the SDK's ctx argument


async def test_sns_sqs_topics_queues_and_messages(tmp_path: Path, aws: services.Aws) -> None:
    topic = f"arn:aws:sns:us-east-1:{ACCOUNT}:catalog-topic"
    queue = f"{aws.endpoint}/{ACCOUNT}/catalog-queue"
    calls = [
        Call("create_topic", {"name": "catalog-topic"}, topic),
        Call("list_topics", {}, "catalog-topic"),
        Call("publish", {"TopicArn": topic, "Message": "hello from the hub"}, "MessageId"),
        Call("create_queue", {"queue_name": "catalog-queue"}, "catalog-queue"),
        Call("list_queues", {}, "catalog-queue"),
        Call("send_message", {"QueueUrl": queue, "MessageBody": "job-42"}, "MessageId"),
        Call("receive_message", {"QueueUrl": queue, "MaxNumberOfMessages": 1}, "job-42"),
        Call("get_queue_attributes", {"QueueUrl": queue, "AttributeNames": ["All"]}, "QueueArn"),
    ]
    outcome = await run_live("aws-sns-sqs", tmp_path, calls, env=aws.env, call_timeout=60)
    assert "job-42" in text(outcome.results[6])
