"""The awslabs IAM and SNS/SQS servers against a real ``moto_server`` on loopback (test AWS config files)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from tests.catalog.live import services
from tests.catalog.live.helpers import HOME, Call, run_live, text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ACCOUNT = "123456789012"  # moto's default account


@pytest.fixture(scope="module")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.Aws]:
    with services.moto(tmp_path_factory.mktemp("moto")) as server:
        yield server


def launch_env(aws: services.Aws) -> dict[str, str]:
    """The moto address for a catalog launch; the AWS files go where the manifests read them (``{home}/data/aws``).

    The sandbox shows the server only its granted folders, so the test's own config files elsewhere stay invisible.
    """
    files = HOME / "data" / "aws"
    files.mkdir(parents=True, exist_ok=True)
    moved = {"config": "AWS_CONFIG_FILE", "credentials": "AWS_SHARED_CREDENTIALS_FILE"}
    for name, var in moved.items():
        (files / name).write_text(Path(aws.env[var]).read_text(encoding="utf-8"), encoding="utf-8")
    return {k: v for k, v in aws.env.items() if k not in moved.values()}


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
        "aws-iam",
        tmp_path,
        calls,
        extra_args=["--allow-write", "--no-confirmation"],
        env=launch_env(aws),
        call_timeout=60,
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
    outcome = await run_live("aws-sns-sqs", tmp_path, calls, env=launch_env(aws), call_timeout=60)
    assert "job-42" in text(outcome.results[6])


CLOUDWATCH_SEED = """
import boto3, datetime
logs = boto3.client("logs")
logs.create_log_group(logGroupName="/catalog/app")
logs.create_log_stream(logGroupName="/catalog/app", logStreamName="web")
now = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
event = {"timestamp": now, "message": "GET /"}
logs.put_log_events(logGroupName="/catalog/app", logStreamName="web", logEvents=[event])
cw = boto3.client("cloudwatch")
datum = {"MetricName": "Latency", "Value": 42.0, "Unit": "Milliseconds"}
cw.put_metric_data(Namespace="Catalog/App", MetricData=[datum])
cw.put_metric_alarm(
    AlarmName="catalog-latency", Namespace="Catalog/App", MetricName="Latency", Statistic="Average", Period=60,
    EvaluationPeriods=1, Threshold=10.0, ComparisonOperator="GreaterThanThreshold",
)
cw.set_alarm_state(AlarmName="catalog-latency", StateValue="ALARM", StateReason="catalog test")
"""


async def test_cloudwatch_logs_metrics_and_alarms(tmp_path: Path, aws: services.Aws) -> None:
    await anyio.to_thread.run_sync(services.seed_aws, aws, CLOUDWATCH_SEED)
    span = {"start_time": "2020-01-01T00:00:00Z", "end_time": "2030-01-01T00:00:00Z"}
    latency = {"namespace": "Catalog/App", "metric_name": "Latency"}
    query = {"log_group_names": ["/catalog/app"], "query_string": "fields @message", "max_timeout": 5, **span}
    calls = [
        Call("get_active_alarms", {}, "catalog-latency"),
        Call("get_metric_data", {**latency, "start_time": span["start_time"]}, "metricDataResults"),
        Call("analyze_metric", latency, "Latency"),
        Call("get_recommended_metric_alarms", {"namespace": "AWS/EC2", "metric_name": "CPUUtilization"}, "recommend"),
        Call("get_metric_metadata", {"namespace": "AWS/EC2", "metric_name": "CPUUtilization"}, "CPU"),
        Call("execute_log_insights_query", query, "queryId"),
        Call("recommend_indexes_account", {}, "total_log_groups_analyzed"),
    ]
    outcome = await run_live("aws-cloudwatch", tmp_path, calls, env=launch_env(aws), call_timeout=60)
    names = {t.name for t in outcome.tools}
    assert not any(name.startswith(("execute_promql", "get_promql")) for name in names)  # hidden: no local PromQL
    assert "get_alarm_history" not in names  # hidden: moto lacks DescribeAlarmHistory
