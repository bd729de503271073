"""Exposed names: pure functions, deterministic across restarts, collision-free, and always valid.

Tool and prompt names become ``<alias>__<name>`` and match ``^[A-Za-z0-9_-]{1,64}$`` whatever the downstream
calls them: names that need changing (invalid characters, too long) get a short digest of the original, so two
different originals never share an exposed name. Resource URIs become ``hub://<alias>/<original>``, which keeps
URI templates intact and is reversed by splitting at the first ``/`` after the alias.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_NAME = 64
SEPARATOR = "__"
ALIAS_MAX = 16
URI_SCHEME = "hub://"

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_INVALID_ALIAS_CHARS = re.compile(r"[^A-Za-z0-9-]+")


def digest(text: str, size: int = 6) -> str:
    """A short, stable hex digest of ``text``."""
    return hashlib.blake2s(text.encode("utf-8"), digest_size=8).hexdigest()[:size]


def derive_alias(server: str) -> str:
    """The default alias of a server: its name reduced to letters, digits and '-', at most 16 characters."""
    alias = _INVALID_ALIAS_CHARS.sub("-", server).strip("-") or "server"
    if alias == server and len(alias) <= ALIAS_MAX:
        return alias
    alias = alias[: ALIAS_MAX - 5].rstrip("-")  # leave room for the digest that tells altered names apart
    return f"{alias}-{digest(server, 4)}"


def assign_aliases(servers: Iterable[str], explicit: Mapping[str, str | None]) -> dict[str, str]:
    """Aliases for every server: explicit ones win, the rest are derived, in name order, and made unique."""
    names = sorted(servers)
    taken: dict[str, str] = {}
    for name in names:
        alias = explicit.get(name)
        if alias:
            taken[alias] = name
    result = {name: alias for alias, name in taken.items()}
    for name in names:
        if name in result:
            continue
        alias = derive_alias(name)
        if alias in taken:
            alias = f"{alias[: ALIAS_MAX - 7].rstrip('-')}-{digest(name, 6)}"
        counter = 2
        base = alias
        while alias in taken:
            alias = f"{base[: ALIAS_MAX - 3]}-{counter}"
            counter += 1
        taken[alias] = name
        result[name] = alias
    return result


def expose_name(name: str, prefix: str | None) -> str:
    """The exposed form of a downstream tool or prompt name, under ``prefix`` (an alias) or none."""
    head = f"{prefix}{SEPARATOR}" if prefix else ""
    room = MAX_NAME - len(head)
    if NAME_PATTERN.match(name) and len(name) <= room:
        return head + name
    cleaned = _INVALID_NAME_CHARS.sub("_", name)
    tag = digest(name, 6)
    cleaned = cleaned[: room - len(tag) - 1]
    return f"{head}{cleaned}_{tag}"


def expose_uri(uri: str, prefix: str | None) -> str:
    """The exposed form of a resource URI or URI template."""
    return f"{URI_SCHEME}{prefix}/{uri}" if prefix else uri


def split_uri(uri: str) -> tuple[str, str] | None:
    """``(alias, original)`` for an exposed URI, or ``None`` when it is not one of ours."""
    if not uri.startswith(URI_SCHEME):
        return None
    alias, sep, original = uri[len(URI_SCHEME) :].partition("/")
    if not sep or not alias or not original:
        return None
    return alias, original


def prefixed_servers(prefix: bool | str, servers: Iterable[str], *, own: Iterable[str] = ()) -> frozenset[str]:
    """The servers whose names carry their alias, for ``exposure.prefix`` (``True``, ``False`` or ``"auto"``).

    ``"auto"`` prefixes nothing when there is a single server, and otherwise everything but a single downstream: the
    hub's ``own`` servers (memory, llm) keep their prefix, so turning memory on does not rename a lone downstream's
    tools, and a downstream tool called ``recall`` cannot collide with the memory server's.
    """
    names = list(servers)
    if prefix is True or prefix is False:
        return frozenset(names) if prefix else frozenset()
    mine = set(own)
    downstream = [name for name in names if name not in mine]
    if len(names) <= 1:
        return frozenset()
    if len(downstream) == 1:
        return frozenset(name for name in names if name in mine)
    return frozenset(names)
