"""The registry: exposed views of every listing, change detection, and resolution back to servers."""

from __future__ import annotations

import mcp_types as types
import pytest

from hanzo_hub.backends.listing import Listing
from hanzo_hub.errors import PromptNotFound, ResourceNotFound, ToolNotFound
from hanzo_hub.hub.naming import NAME_PATTERN
from hanzo_hub.hub.registry import Registry, Target


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, description=f"the {name} tool", input_schema={"type": "object"})


def listing(*tools: str, resources: tuple[str, ...] = (), templates: tuple[str, ...] = ()) -> Listing:
    return Listing(
        tools=tuple(tool(t) for t in tools),
        resources=tuple(types.Resource(name=u, uri=u) for u in resources),
        templates=tuple(types.ResourceTemplate(name=u, uri_template=u) for u in templates),
        prompts=(types.Prompt(name="greet"),),
    )


def registry(prefix: bool = True) -> Registry:
    return Registry(["alpha", "beta"], {"alpha": "a", "beta": "b"}, prefix=prefix)


def test_tools_are_exposed_in_configuration_order_under_aliases() -> None:
    reg = registry()
    reg.set("beta", listing("search"))
    reg.set("alpha", listing("echo", "add"))
    assert [t.name for t in reg.tools()] == ["a__echo", "a__add", "b__search"]
    assert [t.description for t in reg.tools()] == ["the echo tool", "the add tool", "the search tool"]


def test_set_reports_which_kinds_changed() -> None:
    reg = registry()
    assert reg.set("alpha", listing("echo", resources=("x://1",))) == {"tools", "resources", "prompts"}
    assert reg.set("alpha", listing("echo", resources=("x://1",))) == set()
    assert reg.set("alpha", listing("echo", "add", resources=("x://1",))) == {"tools"}
    assert reg.set("alpha", listing("echo", "add", templates=("x://{id}",))) == {"resources"}


def test_a_tool_resolves_to_its_server_and_original_name() -> None:
    reg = registry()
    reg.set("alpha", listing("get.weather"))
    (exposed,) = reg.tools()
    assert NAME_PATTERN.match(exposed.name)
    assert reg.resolve_tool(exposed.name) == Target("alpha", "get.weather")


def test_unknown_names_raise_not_found() -> None:
    reg = registry()
    reg.set("alpha", listing("echo"))
    with pytest.raises(ToolNotFound):
        reg.resolve_tool("a__nope")
    with pytest.raises(PromptNotFound):
        reg.resolve_prompt("b__greet")
    with pytest.raises(ResourceNotFound):
        reg.resolve_uri("hub://zzz/x://1")


def test_prompts_resolve_like_tools() -> None:
    reg = registry()
    reg.set("alpha", listing())
    reg.set("beta", listing())
    assert [p.name for p in reg.prompts()] == ["a__greet", "b__greet"]
    assert reg.resolve_prompt("b__greet") == Target("beta", "greet")


def test_listed_and_templated_uris_resolve_to_their_server() -> None:
    reg = registry()
    reg.set("alpha", listing(resources=("file:///a.txt",), templates=("items://{id}",)))
    assert [str(r.uri) for r in reg.resources()] == ["hub://a/file:///a.txt"]
    assert [t.uri_template for t in reg.templates()] == ["hub://a/items://{id}"]
    assert reg.resolve_uri("hub://a/file:///a.txt") == Target("alpha", "file:///a.txt")
    assert reg.resolve_uri("hub://a/items://42") == Target("alpha", "items://42")


def test_a_new_listing_replaces_the_old_one() -> None:
    reg = registry()
    reg.set("alpha", listing("old"))
    reg.set("alpha", listing("new"))
    assert [t.name for t in reg.tools()] == ["a__new"]
    with pytest.raises(ToolNotFound):
        reg.resolve_tool("a__old")


def test_without_prefixes_the_first_configured_server_wins() -> None:
    reg = registry(prefix=False)
    reg.set("beta", listing("echo", "only_beta"))
    reg.set("alpha", listing("echo"))
    assert [t.name for t in reg.tools()] == ["echo", "only_beta"]
    assert reg.resolve_tool("echo") == Target("alpha", "echo")
    assert reg.resolve_tool("only_beta") == Target("beta", "only_beta")


def test_without_prefixes_uris_go_to_the_first_server_offering_resources() -> None:
    reg = registry(prefix=False)
    reg.set("alpha", listing("echo"))
    reg.set("beta", listing(templates=("items://{id}",)))
    assert reg.resolve_uri("items://7") == Target("beta", "items://7")


def test_a_single_unprefixed_server_owns_every_uri() -> None:
    reg = Registry(["solo"], {"solo": "solo"}, prefix=False)
    reg.set("solo", listing("echo"))
    assert reg.resolve_uri("anything://x") == Target("solo", "anything://x")


def test_prefixing_is_decided_per_server() -> None:
    reg = Registry(["solo", "memory"], {"solo": "solo", "memory": "memory"}, prefix={"memory"})
    reg.set("solo", Listing(tools=(tool("echo"),), resources=(types.Resource(name="r", uri="file:///r"),)))
    reg.set("memory", Listing(tools=(tool("recall"),), resources=(types.Resource(name="m", uri="memory://m"),)))
    assert {t.name for t in reg.tools()} == {"echo", "memory__recall"}
    assert reg.resolve_tool("echo") == Target("solo", "echo")
    assert reg.resolve_tool("memory__recall") == Target("memory", "recall")
    assert reg.resolve_uri("hub://memory/memory://m") == Target("memory", "memory://m")
    assert reg.resolve_uri("file:///r") == Target("solo", "file:///r")
    assert reg.prefixed("memory")
    assert not reg.prefixed("solo")
