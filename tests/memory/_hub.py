"""Helpers for memory tests that go through a real hub: settings, tool names, results, randomized scopes."""

from __future__ import annotations

import json
import random
from typing import Any

import mcp_types as types
from mcp import Client

from hanzo_hub.hub.core import Hub
from tests.conftest import inproc

MEMORY = {"enabled": True, "embedder": "fake", "store": "chroma"}
"""The persistent ChromaDB store (the default) with the hashing embedder: no model weights, real storage."""

SERVERS = {"alpha": inproc("alpha")}
"""One downstream beside memory, so names are prefixed as in a real setup (``memory__remember``)."""

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "ember",
    "falcon",
    "garnet",
    "harbor",
    "island",
    "jasper",
    "kettle",
    "lantern",
    "meadow",
    "nickel",
    "orchard",
    "pepper",
    "quartz",
    "raven",
    "saddle",
    "timber",
    "umber",
    "velvet",
    "walnut",
    "yarrow",
    "zephyr",
    "copper",
    "willow",
    "canyon",
    "thistle",
    "marble",
]


def tool(name: str) -> str:
    return f"memory__{name}"


async def call(client: Client, name: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Call a memory tool through the hub and return its structured result (failing on an error result)."""
    result = await client.call_tool(tool(name), arguments, **kwargs)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def recalled(result: dict[str, Any]) -> list[str]:
    return [item["memory"]["content"] for item in result["results"]]


def listed(result: dict[str, Any]) -> list[str]:
    return [item["content"] for item in result["memories"]]


def exported(result: dict[str, Any]) -> list[str]:
    return [json.loads(line)["content"] for line in result["jsonl"].splitlines() if line.strip()]


async def listing_uri(client: Client, tier: str) -> str:
    """The exposed URI of the memory server's per-tier listing resource (from the hub's templates)."""
    templates = (await client.list_resource_templates()).resource_templates
    (template,) = [t.uri_template for t in templates if t.uri_template.endswith("{tier}/entries")]
    return template.replace("{tier}", tier)


async def read_listing(client: Client, tier: str, **kwargs: Any) -> list[str]:
    result = await client.read_resource(await listing_uri(client, tier), **kwargs)
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    return [item["content"] for item in json.loads(content.text)]


def memories_for(rng: random.Random, marker: str, count: int) -> list[str]:
    """``count`` random memories, each starting with ``marker`` (how a leak is recognised)."""
    return [f"{marker} " + " ".join(rng.sample(WORDS, 4)) + f" #{i}" for i in range(count)]


def roots_callback(uri: str) -> Any:
    """A ``list_roots_callback`` answering one root, ``uri``."""

    async def answer(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=uri, name="workspace")])

    return answer


def session_scopes(hub: Hub) -> list[str]:
    """The client sessions whose session tier the hub's memory server holds open."""
    assert hub.memory is not None
    service = hub.memory.holder.service
    assert service is not None
    return [index.key.session for index in service.store.opened() if index.key.tier == "session"]
