"""redis-mcp-server against a real ``redis-server`` on loopback (strings, hashes, lists, sets, sorted sets, streams)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.catalog.live import services
from tests.catalog.live.helpers import Call, run_live

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with services.redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


async def test_redis_through_hub(tmp_path: Path, redis_url: str) -> None:
    calls = [
        Call("set", {"key": "greeting", "value": "hello catalog"}, "greeting"),
        Call("get", {"key": "greeting"}, "hello catalog"),
        Call("hset", {"name": "user:1", "key": "lang", "value": "python"}, "lang"),
        Call("hgetall", {"name": "user:1"}, "python"),
        Call("rpush", {"name": "queue", "value": "job-1"}, "job-1"),
        Call("lrange", {"name": "queue", "start": 0, "stop": -1}, "job-1"),
        Call("sadd", {"name": "tags", "value": "mcp"}, "tags"),
        Call("smembers", {"name": "tags"}, "mcp"),
        Call("zadd", {"key": "scores", "score": 42, "member": "alice"}, "alice"),
        Call("zrange", {"key": "scores", "start": 0, "end": -1}, "alice"),
        Call("xadd", {"key": "events", "fields": {"kind": "deploy"}}, "events"),
        Call("xrange", {"key": "events"}, "deploy"),
        Call("dbsize", {}, '"result": 6'),  # greeting, user:1, queue, tags, scores, events
    ]
    outcome = await run_live("redis", tmp_path, calls, args=["--url", redis_url])
    assert "json_set" not in {t.name for t in outcome.tools}  # hidden: needs Redis Stack
