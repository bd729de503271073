"""MQTT tools (paho-mqtt): publish a message, collect messages from topic filters for a bounded time."""

from __future__ import annotations

import base64
import itertools
import ssl
import threading
import time
from typing import Annotated, Any, Literal

import paho.mqtt.client as paho
from mcp_types import CallToolResult, ToolAnnotations
from paho.mqtt.enums import CallbackAPIVersion
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.comms._settings import CommsSettings, require, settings, tls_context
from servers.comms.server import mcp

Topic = Annotated[
    str, Field(min_length=1, max_length=65535, pattern=r"^[^#+\x00]+$", description="e.g. home/kitchen/temp")
]
TopicFilter = Annotated[
    str, Field(min_length=1, max_length=65535, pattern=r"^[^\x00]+$", description="filter, '+' and '#' wildcards")
]
QoS = Annotated[Literal[0, 1, 2], Field(description="0 at most once, 1 at least once, 2 exactly once")]
_ids = itertools.count(1)


def _connected(config: CommsSettings) -> paho.Client:
    host = require(config.mqtt_host, "COMMS_MQTT_HOST", "MQTT")
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"hanzo-comms-{time.time_ns()}-{next(_ids)}")
    if config.mqtt_username:
        password = config.mqtt_password.get_secret_value() if config.mqtt_password else None
        client.username_pw_set(config.mqtt_username, password)
    if config.mqtt_tls:
        client.tls_set_context(tls_context(config))
    ready = threading.Event()
    outcome: list[Any] = []

    def on_connect(_c: paho.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        outcome.append(reason)
        ready.set()

    client.on_connect = on_connect
    try:
        client.connect(host, config.mqtt_port, keepalive=30)
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(f"cannot reach the MQTT broker {host}:{config.mqtt_port}: {exc}") from exc
    client.loop_start()
    if not ready.wait(config.timeout_seconds) or outcome[0].is_failure:
        client.loop_stop()
        client.disconnect()
        reason = outcome[0] if outcome else "no answer"
        raise ToolError(f"MQTT connect refused: {reason}; check COMMS_MQTT_USERNAME/COMMS_MQTT_PASSWORD")
    return client


def _close(client: paho.Client) -> None:
    client.disconnect()
    client.loop_stop()


@mcp.tool(
    description="Publish one message to an MQTT topic on the configured broker (COMMS_MQTT_*), with QoS 0/1/2 "
    "and the retain flag (retained messages are kept and sent to new subscribers). Returns once the broker has "
    "acknowledged it (QoS 1/2).",
    annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
    ),
)
def mqtt_publish(
    topic: Topic,
    payload: Annotated[str, Field(max_length=1_000_000, description="message: text, or base64 bytes")],
    encoding: Annotated[Literal["text", "base64"], Field(description="how payload is given")] = "text",
    qos: QoS = 1,
    retain: Annotated[bool, Field(description="broker keeps it as the topic's last value")] = False,
) -> CallToolResult:
    try:
        data = base64.b64decode(payload, validate=True) if encoding == "base64" else payload.encode("utf-8")
    except ValueError as exc:
        raise ToolError(f"payload is not valid base64: {exc}") from exc
    config = settings()
    client = _connected(config)
    try:
        info = client.publish(topic, data, qos=qos, retain=retain)
        info.wait_for_publish(timeout=config.timeout_seconds)
        if not info.is_published():
            raise ToolError(f"the broker did not acknowledge the message within {config.timeout_seconds}s")
    finally:
        _close(client)
    return json_result({"topic": topic, "bytes": len(data), "qos": qos, "retain": retain, "mid": info.mid})


@mcp.tool(
    description="Subscribe to MQTT topic filters ('+' one level, '#' the rest) and collect messages until "
    "max_messages arrive or `seconds` pass, whichever is first; retained messages arrive at once. Returns a table "
    "of topic, payload (text or base64), qos and retained.",
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True),
)
def mqtt_collect(
    topics: Annotated[list[TopicFilter], Field(min_length=1, max_length=20, description="topic filters")],
    max_messages: Annotated[int, Field(ge=1, le=10_000, description="stop after this many")] = 10,
    seconds: Annotated[float, Field(gt=0, le=120, description="stop after this long")] = 5.0,
    qos: QoS = 0,
) -> CallToolResult:
    config = settings()
    messages: list[list[Any]] = []
    done = threading.Event()
    subscribed = threading.Event()
    lock = threading.Lock()

    def on_message(_c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        try:
            payload, encoding = msg.payload.decode("utf-8"), "text"
        except UnicodeDecodeError:
            payload, encoding = base64.b64encode(msg.payload).decode("ascii"), "base64"
        with lock:
            if len(messages) < max_messages:
                messages.append([msg.topic, payload, encoding, msg.qos, bool(msg.retain)])
            if len(messages) >= max_messages:
                done.set()

    client = _connected(config)
    client.on_message = on_message
    client.on_subscribe = lambda *_args: subscribed.set()
    try:
        try:
            result, _ = client.subscribe([(t, int(qos)) for t in topics])
        except ValueError as exc:
            raise ToolError(f"bad topic filter: {exc}") from exc
        if result != paho.MQTT_ERR_SUCCESS or not subscribed.wait(config.timeout_seconds):
            raise ToolError(f"subscribing to {topics} failed ({paho.error_string(result)})")
        done.wait(seconds)
    finally:
        _close(client)
    with lock:
        rows = list(messages)
    return table_result(["topic", "payload", "encoding", "qos", "retained"], rows, complete=len(rows) >= max_messages)
