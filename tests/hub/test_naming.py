"""Exposed names and URIs: always valid, deterministic, collision-free, reversible."""

from __future__ import annotations

import random
import string

import pytest

from hanzo_hub.hub.naming import (
    ALIAS_MAX,
    NAME_PATTERN,
    assign_aliases,
    derive_alias,
    expose_name,
    expose_uri,
    prefixed_servers,
    split_uri,
)

ALPHABET = string.ascii_letters + string.digits + "_-./:@ éüß漢字🙂\t"


def random_names(seed: int, count: int, max_len: int = 120) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, max_len))) for _ in range(count)]


@pytest.mark.parametrize(
    "name",
    [
        "get_weather",
        "a" * 64,
        "a" * 200,
        "tool.with.dots",
        "slash/name",
        "名前",
        "emoji🙂tool",
        "",
        "-",
        "with space",
    ],
)
@pytest.mark.parametrize("prefix", [None, "s", "github", "x" * ALIAS_MAX, "a" * 24])
def test_exposed_name_is_always_valid(name: str, prefix: str | None) -> None:
    assert NAME_PATTERN.match(expose_name(name, prefix))


def test_exposed_names_of_generated_names_are_valid_and_distinct() -> None:
    names = set(random_names(seed=1234, count=3000))
    for prefix in (None, "srv", "p" * ALIAS_MAX):
        exposed = {expose_name(name, prefix) for name in names}
        assert len(exposed) == len(names)
        assert all(NAME_PATTERN.match(e) for e in exposed)


def test_exposed_name_is_stable() -> None:
    for name in random_names(seed=7, count=200):
        assert expose_name(name, "srv") == expose_name(name, "srv")


def test_valid_names_keep_their_spelling() -> None:
    assert expose_name("get_weather", "wx") == "wx__get_weather"
    assert expose_name("get_weather", None) == "get_weather"


def test_names_that_sanitize_alike_stay_apart() -> None:
    variants = ["a.b", "a/b", "a b", "a:b", "a_b", "a-b"]
    exposed = [expose_name(v, "s") for v in variants]
    assert len(set(exposed)) == len(variants)


def test_truncated_names_with_a_common_head_stay_apart() -> None:
    head = "x" * 80
    exposed = {expose_name(head + tail, "srv") for tail in ("1", "2", "3")}
    assert len(exposed) == 3
    assert all(len(e) <= 64 for e in exposed)


def test_derived_alias_is_short_valid_and_stable() -> None:
    for server in [*random_names(seed=99, count=500, max_len=60), "github", "my.server", "x" * 40]:
        alias = derive_alias(server)
        assert alias == derive_alias(server)
        assert 1 <= len(alias) <= ALIAS_MAX
        assert all(ch in string.ascii_letters + string.digits + "-" for ch in alias)


def test_derived_alias_of_a_clean_short_name_is_the_name() -> None:
    assert derive_alias("github") == "github"
    assert derive_alias("my-server-2") == "my-server-2"


def test_assigned_aliases_are_unique_even_when_names_sanitize_alike() -> None:
    servers = ["my.server", "my_server", "my server", "my-server", "my/server", "MY.SERVER"]
    aliases = assign_aliases(servers, {})
    assert len(set(aliases.values())) == len(servers)
    assert all(1 <= len(a) <= ALIAS_MAX for a in aliases.values())


def test_assigned_aliases_do_not_depend_on_configuration_order() -> None:
    servers = [*random_names(seed=5, count=100, max_len=30), "a.b", "a_b", "a b"]
    shuffled = list(servers)
    random.Random(1).shuffle(shuffled)
    assert assign_aliases(servers, {}) == assign_aliases(shuffled, {})


def test_explicit_aliases_win_and_derived_ones_avoid_them() -> None:
    aliases = assign_aliases(["github", "gh-mirror"], {"gh-mirror": "github", "github": None})
    assert aliases["gh-mirror"] == "github"
    assert aliases["github"] != "github"
    assert len(set(aliases.values())) == 2


def test_many_servers_get_distinct_aliases_and_tools_distinct_names() -> None:
    servers = [f"server-{i:03d}.example" for i in range(300)]
    aliases = assign_aliases(servers, {})
    assert len(set(aliases.values())) == 300
    exposed = {expose_name(f"tool{t}", alias) for alias in aliases.values() for t in range(10)}
    assert len(exposed) == 3000
    assert all(NAME_PATTERN.match(e) for e in exposed)


@pytest.mark.parametrize(
    "uri",
    [
        "file:///tmp/a.txt",
        "fixture://doc",
        "fixture://items/{item}",
        "https://example.com/a/b?c=d#e",
        "repo://{owner}/{name}/blob/{path}",
        "urn:isbn:0451450523",
        "hub://nested/uri",
    ],
)
def test_uri_round_trips_through_its_exposed_form(uri: str) -> None:
    exposed = expose_uri(uri, "srv")
    assert exposed.startswith("hub://srv/")
    assert split_uri(exposed) == ("srv", uri)


def test_uri_template_variables_survive_exposure() -> None:
    assert expose_uri("fixture://items/{item}", "a") == "hub://a/fixture://items/{item}"


def test_unprefixed_uri_is_unchanged() -> None:
    assert expose_uri("fixture://doc", None) == "fixture://doc"


@pytest.mark.parametrize("uri", ["fixture://doc", "hub://", "hub://alias", "hub:///x", "hub://alias/"])
def test_foreign_or_incomplete_uris_do_not_split(uri: str) -> None:
    assert split_uri(uri) is None


@pytest.mark.parametrize(
    ("prefix", "servers", "own", "expected"),
    [
        ("auto", ["solo"], [], set()),
        ("auto", ["memory"], ["memory"], set()),
        ("auto", ["solo", "memory", "llm"], ["memory", "llm"], {"memory", "llm"}),
        ("auto", ["a", "b", "memory"], ["memory"], {"a", "b", "memory"}),
        ("auto", ["a", "b"], [], {"a", "b"}),
        (True, ["solo"], [], {"solo"}),
        (False, ["a", "memory"], ["memory"], set()),
    ],
)
def test_prefixed_servers(prefix: bool | str, servers: list[str], own: list[str], expected: set[str]) -> None:
    assert prefixed_servers(prefix, servers, own=own) == expected
