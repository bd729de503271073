"""Key-value servers against real services on loopback: redis-mcp-server and awslabs' Valkey server against
``redis-server`` (Valkey speaks the same protocol), awslabs' Memcached server against ``memcached``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

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
        # a WRONGTYPE failure comes back as plain text; the manifest's errorPatterns make it an error result
        Call("lpop", {"name": "greeting"}, "Error", error=True),
    ]
    outcome = await run_live("redis", tmp_path, calls, args=["--url", redis_url])
    assert "json_set" not in {t.name for t in outcome.tools}  # hidden: needs Redis Stack


@pytest.fixture(scope="module")
def memcached_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with services.memcached(tmp_path_factory.mktemp("memcached")) as port:
        yield port


async def test_valkey_commands_through_hub(tmp_path: Path, redis_url: str) -> None:
    address = urlparse(redis_url)
    env = {"VALKEY_HOST": "127.0.0.1", "VALKEY_PORT": str(address.port), "VALKEY_ADMIN_ENABLED": "true"}
    calls = [
        Call("valkey_write", {"command": "SET", "args": ["valkey:key", "from-valkey-server"]}, "OK"),
        Call("valkey_read", {"command": "GET", "args": ["valkey:key"]}, "from-valkey-server"),
        Call("valkey_write", {"command": "HSET", "args": ["valkey:h", "field", "v1"]}, "1"),
        Call("valkey_read", {"command": "HGETALL", "args": ["valkey:h"]}, "v1"),
        Call("valkey_admin", {"command": "EVAL", "args": ["return 40 + 2", "0"], "confirm": True}, "42"),
        Call("valkey_write", {"command": "FLUSHALL"}, "error", error=True),  # refused by its policy, as JSON text
    ]
    outcome = await run_live("valkey", tmp_path, calls, env=env)
    assert {t.name for t in outcome.tools} == {"valkey_admin", "valkey_read", "valkey_write"}


async def test_memcached_cache_operations(tmp_path: Path, memcached_port: int) -> None:
    # an expiry is always given: with expire=None the server's client sends a malformed, no-reply command and the
    # value is silently never stored (the server still answers "Successfully set")
    calls = [
        Call("cache_set", {"key": "greeting", "value": "hello", "expire": 300}, "greeting"),
        Call("cache_get", {"key": "greeting"}, "hello"),
        Call("cache_append", {"key": "greeting", "value": " world"}, "greeting"),
        Call("cache_get", {"key": "greeting"}, "hello world"),
        Call("cache_set", {"key": "counter", "value": "40", "expire": 300}, "counter"),
        Call("cache_incr", {"key": "counter", "value": 2}, "42"),
        Call("cache_get_many", {"keys": ["greeting", "counter"]}, "42"),
        Call("cache_delete", {"key": "greeting"}, "greeting"),
        Call("cache_stats", {}, "curr_items"),
    ]
    await run_live("memcached", tmp_path, calls, env={"MEMCACHED_PORT": str(memcached_port)})
