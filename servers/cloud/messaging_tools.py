"""Messaging and logging tools: SQS queues, SNS topics, CloudWatch Logs groups and events."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.cloud._aws import CREATE, DELETE, READ, call, paginate
from servers.cloud.server import mcp

QueueName = Annotated[str, Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_-]+(\.fifo)?$", description="name")]
QueueUrl = Annotated[str, Field(min_length=8, max_length=2048, description="queue URL (see sqs_list_queues)")]
TopicArn = Annotated[str, Field(pattern=r"^arn:aws[\w-]*:sns:", max_length=1024, description="topic ARN")]
LogGroup = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[\w\-/.#]+$", description="log group")]
LogStream = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[^:*]+$", description="log stream name")]
Attributes = Annotated[dict[str, str] | None, Field(max_length=10, description="string message attributes")]


def _message_attributes(attrs: dict[str, str] | None) -> dict[str, Any] | None:
    return {k: {"DataType": "String", "StringValue": v} for k, v in attrs.items()} if attrs else None


@mcp.tool(
    description="Create an SQS queue (a name ending in .fifo makes a FIFO queue) with optional visibility timeout "
    "and retention. Returns the queue URL used by the other SQS tools.",
    annotations=CREATE,
)
def sqs_create_queue(
    name: QueueName,
    visibility_timeout_seconds: Annotated[int | None, Field(ge=0, le=43200, description="hide time")] = None,
    retention_seconds: Annotated[int | None, Field(ge=60, le=1209600, description="keep messages this long")] = None,
) -> CallToolResult:
    attributes = {
        "VisibilityTimeout": None if visibility_timeout_seconds is None else str(visibility_timeout_seconds),
        "MessageRetentionPeriod": None if retention_seconds is None else str(retention_seconds),
        "FifoQueue": "true" if name.endswith(".fifo") else None,
    }
    response = call("sqs", "create_queue", QueueName=name, Attributes={k: v for k, v in attributes.items() if v})
    return json_result({"queueUrl": response["QueueUrl"]})


@mcp.tool(
    description="List SQS queues, optionally those whose name starts with a prefix, with their approximate number "
    "of waiting messages. Returns a table of URL and message counts.",
    annotations=READ,
)
def sqs_list_queues(
    name_prefix: Annotated[str | None, Field(max_length=80, description="only names starting with this")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="most queues to return")] = 100,
) -> CallToolResult:
    urls = paginate("sqs", "list_queues", "QueueUrls", limit, QueueNamePrefix=name_prefix)
    rows = []
    for url in urls:
        attrs = call(
            "sqs",
            "get_queue_attributes",
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        ).get("Attributes", {})
        rows.append(
            [
                url,
                int(attrs.get("ApproximateNumberOfMessages", 0)),
                int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
            ]
        )
    return table_result(["queueUrl", "messages", "inFlight"], rows)


@mcp.tool(
    description="Send a message to an SQS queue, with optional string attributes, a delay, and (for FIFO queues) a "
    "group id and deduplication id. Returns the message id.",
    annotations=CREATE,
)
def sqs_send_message(
    queue_url: QueueUrl,
    body: Annotated[str, Field(min_length=1, max_length=262144, description="message body")],
    attributes: Attributes = None,
    delay_seconds: Annotated[int | None, Field(ge=0, le=900, description="deliver after this delay")] = None,
    group_id: Annotated[str | None, Field(max_length=128, description="FIFO message group id")] = None,
    deduplication_id: Annotated[str | None, Field(max_length=128, description="FIFO dedup id")] = None,
) -> CallToolResult:
    response = call(
        "sqs",
        "send_message",
        QueueUrl=queue_url,
        MessageBody=body,
        MessageAttributes=_message_attributes(attributes),
        DelaySeconds=delay_seconds,
        MessageGroupId=group_id,
        MessageDeduplicationId=deduplication_id,
    )
    return json_result({"messageId": response.get("MessageId"), "sequenceNumber": response.get("SequenceNumber")})


@mcp.tool(
    description="Receive up to 10 messages from an SQS queue, waiting up to wait_seconds for one to arrive (long "
    "polling). With delete=true the messages are removed after reading (consumed); otherwise they reappear after "
    "the visibility timeout. Returns a table of message id, body and attributes.",
    annotations=DELETE,
)
def sqs_receive_messages(
    queue_url: QueueUrl,
    max_messages: Annotated[int, Field(ge=1, le=10, description="most messages to receive")] = 10,
    wait_seconds: Annotated[int, Field(ge=0, le=20, description="long-poll wait")] = 2,
    delete: Annotated[bool, Field(description="delete the messages once received")] = False,
) -> CallToolResult:
    response = call(
        "sqs",
        "receive_message",
        QueueUrl=queue_url,
        MaxNumberOfMessages=max_messages,
        WaitTimeSeconds=wait_seconds,
        MessageAttributeNames=["All"],
    )
    messages = response.get("Messages", [])
    if delete and messages:
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        call("sqs", "delete_message_batch", QueueUrl=queue_url, Entries=entries)
    rows = [
        [m["MessageId"], m.get("Body"), {k: v.get("StringValue") for k, v in m.get("MessageAttributes", {}).items()}]
        for m in messages
    ]
    return table_result(["messageId", "body", "attributes"], rows, deleted=delete and bool(messages))


@mcp.tool(
    description="Create an SNS topic (idempotent: an existing topic's ARN is returned). Returns the topic ARN.",
    annotations=CREATE,
)
def sns_create_topic(
    name: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_-]+(\.fifo)?$", description="name")],
) -> CallToolResult:
    return json_result({"topicArn": call("sns", "create_topic", Name=name)["TopicArn"]})


@mcp.tool(
    description="List SNS topics with their subscriptions (protocol and endpoint). Returns a table.",
    annotations=READ,
)
def sns_list_topics(
    limit: Annotated[int, Field(ge=1, le=1000, description="most topics to return")] = 100,
) -> CallToolResult:
    topics = paginate("sns", "list_topics", "Topics", limit)
    rows = []
    for t in topics:
        subs = paginate("sns", "list_subscriptions_by_topic", "Subscriptions", 100, TopicArn=t["TopicArn"])
        rows.append([t["TopicArn"], [f"{s.get('Protocol')}:{s.get('Endpoint')}" for s in subs]])
    return table_result(["topicArn", "subscriptions"], rows)


@mcp.tool(
    description="Publish a message to an SNS topic (delivered to all its subscribers), with an optional subject "
    "and string attributes. Returns the message id.",
    annotations=CREATE,
)
def sns_publish(
    topic_arn: TopicArn,
    message: Annotated[str, Field(min_length=1, max_length=262144, description="message text")],
    subject: Annotated[str | None, Field(max_length=100, description="subject (email subscribers)")] = None,
    attributes: Attributes = None,
) -> CallToolResult:
    response = call(
        "sns",
        "publish",
        TopicArn=topic_arn,
        Message=message,
        Subject=subject,
        MessageAttributes=_message_attributes(attributes),
    )
    return json_result({"messageId": response.get("MessageId")})


@mcp.tool(
    description="Create a CloudWatch Logs group, optionally with a retention period in days. Returns the group name.",
    annotations=CREATE,
)
def logs_create_group(
    group: LogGroup,
    retention_days: Annotated[
        Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653] | None,
        Field(description="delete events older than this"),
    ] = None,
) -> CallToolResult:
    call("logs", "create_log_group", logGroupName=group)
    if retention_days is not None:
        call("logs", "put_retention_policy", logGroupName=group, retentionInDays=retention_days)
    return json_result({"group": group, "retentionDays": retention_days})


@mcp.tool(
    description="Append log lines to a CloudWatch Logs stream (created if missing) in an existing group, stamped "
    "with the current time. Returns how many events were written.",
    annotations=CREATE,
)
def logs_put_events(
    group: LogGroup,
    stream: LogStream,
    messages: Annotated[list[str], Field(min_length=1, max_length=1000, description="log lines, oldest first")],
) -> CallToolResult:
    try:
        call("logs", "create_log_stream", logGroupName=group, logStreamName=stream)
    except ToolError as exc:
        if "ResourceAlreadyExists" not in str(exc):
            raise
    now = int(time.time() * 1000)
    events = [{"timestamp": now, "message": m} for m in messages]
    response = call("logs", "put_log_events", logGroupName=group, logStreamName=stream, logEvents=events)
    rejected = response.get("rejectedLogEventsInfo")
    return json_result({"group": group, "stream": stream, "written": len(events), "rejected": rejected})


@mcp.tool(
    description="Read events of a CloudWatch Logs group, optionally of some streams, matching a filter pattern "
    "(e.g. 'ERROR' or '\"disk full\"') within the last N minutes. Returns a table of time, stream and message.",
    annotations=READ,
)
def logs_get_events(
    group: LogGroup,
    streams: Annotated[list[LogStream] | None, Field(max_length=100, description="only these streams")] = None,
    pattern: Annotated[str | None, Field(max_length=1024, description="CloudWatch filter pattern")] = None,
    since_minutes: Annotated[int, Field(ge=1, le=60 * 24 * 90, description="look back this far")] = 60,
    limit: Annotated[int, Field(ge=1, le=10000, description="most events to return")] = 500,
) -> CallToolResult:
    start = int((time.time() - since_minutes * 60) * 1000)
    events = paginate(
        "logs",
        "filter_log_events",
        "events",
        limit,
        logGroupName=group,
        logStreamNames=streams,
        filterPattern=pattern,
        startTime=start,
    )
    rows = [
        [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e["timestamp"] / 1000)), e.get("logStreamName"), e["message"]]
        for e in events
    ]
    return table_result(["time", "stream", "message"], rows)
