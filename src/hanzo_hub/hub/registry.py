"""The aggregated view: every server's listing under exposed names, and the way back from a name to its server.

The registry is rebuilt per server when a listing arrives (snapshot or live); lookups are dictionary hits. When
prefixes are off, the first server (in configuration order) wins a name both servers use, and the collision is
logged; with prefixes on, names cannot collide. Prefixing is decided per server: ``exposure.prefix: "auto"`` leaves a
single downstream unprefixed while the hub's own servers (memory, llm) keep their prefixes.

A server's ``tools`` filter (allow/deny patterns of its own tool names) and ``tool_overrides`` (from its spec, or its
catalog manifest's ``toolOverrides``) are applied here, before prefixing: a filtered or hidden tool is neither
listed nor callable, a renamed one is exposed (and called) under its new name and
forwarded under its own, and a description fix replaces the server's text.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import mcp_types as types

from hanzo_hub.backends.listing import Listing
from hanzo_hub.config import ToolFilterSpec, ToolOverrideSpec
from hanzo_hub.errors import PromptNotFound, ResourceNotFound, ToolNotFound
from hanzo_hub.hub.naming import expose_name, expose_uri, split_uri

logger = logging.getLogger(__name__)

KINDS = ("tools", "resources", "prompts")


@dataclass(frozen=True)
class Target:
    """Where an exposed name leads: a server and the name (or URI) it knows."""

    server: str
    original: str


@dataclass(frozen=True)
class _View:
    tools: tuple[types.Tool, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()
    tool_names: tuple[str, ...] = ()  # the server's own name of each exposed tool (overrides may rename)


def apply_overrides(
    tools: Iterable[types.Tool], overrides: Mapping[str, ToolOverrideSpec], keep: ToolFilterSpec | None = None
) -> list[tuple[str, types.Tool]]:
    """``(server's own name, tool as exposed)`` after ``keep`` (the server's allow/deny patterns) and ``overrides``:
    filtered and hidden ones dropped, renames, descriptions set.

    The server's own name stays readable in ``_meta["dev.hanzo-hub/original-name"]`` of a renamed tool.
    """
    out = []
    for tool in tools:
        if keep is not None and not keep.admits(tool.name):
            continue
        fix = overrides.get(tool.name)
        if fix is None:
            out.append((tool.name, tool))
            continue
        if fix.hidden:
            continue
        update: dict[str, object] = {}
        if fix.description is not None:
            update["description"] = fix.description
        if fix.rename is not None:
            update["name"] = fix.rename
            update["meta"] = {**(tool.meta or {}), ORIGINAL_NAME: tool.name}
        out.append((tool.name, tool.model_copy(update=update)))
    return out


ORIGINAL_NAME = "dev.hanzo-hub/original-name"


class Registry:
    """Listings of all servers, exposed."""

    def __init__(
        self,
        servers: Iterable[str],
        aliases: Mapping[str, str],
        *,
        prefix: bool | Iterable[str],
        overrides: Mapping[str, Mapping[str, ToolOverrideSpec]] | None = None,
        filters: Mapping[str, ToolFilterSpec | None] | None = None,
    ) -> None:
        self.listings: dict[str, Listing] = {}
        self._views: dict[str, _View] = {}
        self._tools: dict[str, Target] = {}
        self._prompts: dict[str, Target] = {}
        self._uris: dict[str, Target] = {}
        self._cache: _View = _View()
        self._stale = False
        self.reconfigure(servers, aliases, prefix=prefix, overrides=overrides, filters=filters)

    def reconfigure(
        self,
        servers: Iterable[str],
        aliases: Mapping[str, str],
        *,
        prefix: bool | Iterable[str],
        overrides: Mapping[str, Mapping[str, ToolOverrideSpec]] | None = None,
        filters: Mapping[str, ToolFilterSpec | None] | None = None,
    ) -> None:
        """Serve this set of servers (at start, and for a reloaded config): the listings of servers that remain are
        exposed again under the new aliases, prefixes, overrides and filters; those of servers that went are
        dropped."""
        self._order = list(servers)
        self._overrides = {name: dict(fixes) for name, fixes in (overrides or {}).items() if fixes}
        self._filters = {name: keep for name, keep in (filters or {}).items() if keep is not None}
        self._aliases = dict(aliases)
        self._by_alias = {alias: name for name, alias in self._aliases.items()}
        self._prefixed = frozenset(self._order if prefix is True else () if prefix is False else prefix)
        kept = {name: listing for name, listing in self.listings.items() if name in self._aliases}
        self.listings, self._views = {}, {}
        for name, listing in kept.items():
            self.set(name, listing)
        self._stale = True

    def prefixed(self, server: str) -> bool:
        """Whether ``server``'s names carry its prefix."""
        return server in self._prefixed

    def alias(self, server: str) -> str:
        """The alias of ``server``."""
        return self._aliases[server]

    def counts(self, server: str) -> dict[str, int]:
        """How many tools, resources, templates and prompts of ``server`` are exposed now (after filters)."""
        view = self._views.get(server, _View())
        return {kind: len(getattr(view, kind)) for kind in ("tools", "resources", "templates", "prompts")}

    def set(self, server: str, listing: Listing) -> set[str]:
        """Record ``server``'s listing; returns the kinds (``tools``, ``resources``, ``prompts``) whose view changed."""
        old = self._views.get(server, _View())
        new = self._expose(server, listing)
        self.listings[server] = listing
        self._views[server] = new
        changed = set()
        if old.tools != new.tools:
            changed.add("tools")
        if old.resources != new.resources or old.templates != new.templates:
            changed.add("resources")
        if old.prompts != new.prompts:
            changed.add("prompts")
        if changed:
            self._stale = True  # rebuilt on the next read: loading N snapshots costs one rebuild, not N
        return changed

    def _expose(self, server: str, listing: Listing) -> _View:
        prefix = self._aliases[server] if server in self._prefixed else None
        keep = self._filters.get(server)
        pairs = apply_overrides(listing.tools, self._overrides.get(server, {}), keep)
        if keep is not None and keep.allow and listing.tools and not pairs:
            logger.warning("server %s: no tool matches its allow patterns %s", server, list(keep.allow))
        return _View(
            tools=tuple(t.model_copy(update={"name": expose_name(t.name, prefix)}) for _, t in pairs),
            tool_names=tuple(own for own, _ in pairs),
            resources=tuple(r.model_copy(update={"uri": expose_uri(str(r.uri), prefix)}) for r in listing.resources),
            templates=tuple(
                t.model_copy(update={"uri_template": expose_uri(t.uri_template, prefix)}) for t in listing.templates
            ),
            prompts=tuple(p.model_copy(update={"name": expose_name(p.name, prefix)}) for p in listing.prompts),
        )

    def _current(self) -> None:
        if self._stale:
            self._rebuild()
            self._stale = False

    def _rebuild(self) -> None:
        tools: dict[str, Target] = {}
        prompts: dict[str, Target] = {}
        uris: dict[str, Target] = {}
        view = {"tools": [], "resources": [], "templates": [], "prompts": []}  # type: dict[str, list[object]]
        for server in self._order:
            listing = self.listings.get(server)
            exposed = self._views.get(server)
            if listing is None or exposed is None:
                continue
            for original, tool in zip(exposed.tool_names, exposed.tools, strict=True):
                if _claim(tools, tool.name, Target(server, original), "tool"):
                    view["tools"].append(tool)
            for original_p, prompt in zip(listing.prompts, exposed.prompts, strict=True):
                if _claim(prompts, prompt.name, Target(server, original_p.name), "prompt"):
                    view["prompts"].append(prompt)
            for original_r, resource in zip(listing.resources, exposed.resources, strict=True):
                if _claim(uris, str(resource.uri), Target(server, str(original_r.uri)), "resource"):
                    view["resources"].append(resource)
            view["templates"].extend(exposed.templates)
        self._tools, self._prompts, self._uris = tools, prompts, uris
        self._cache = _View(
            tools=tuple(view["tools"]),  # type: ignore[arg-type]
            resources=tuple(view["resources"]),  # type: ignore[arg-type]
            templates=tuple(view["templates"]),  # type: ignore[arg-type]
            prompts=tuple(view["prompts"]),  # type: ignore[arg-type]
        )

    def tools(self) -> tuple[types.Tool, ...]:
        """Every exposed tool."""
        self._current()
        return self._cache.tools

    def resources(self) -> tuple[types.Resource, ...]:
        """Every exposed resource."""
        self._current()
        return self._cache.resources

    def templates(self) -> tuple[types.ResourceTemplate, ...]:
        """Every exposed resource template."""
        self._current()
        return self._cache.templates

    def prompts(self) -> tuple[types.Prompt, ...]:
        """Every exposed prompt."""
        self._current()
        return self._cache.prompts

    def resolve_tool(self, name: str) -> Target:
        """The server and original name of exposed tool ``name``.

        Raises:
            ToolNotFound: no such tool.
        """
        self._current()
        try:
            return self._tools[name]
        except KeyError:
            raise ToolNotFound(f"Unknown tool: {name}") from None

    def resolve_prompt(self, name: str) -> Target:
        """The server and original name of exposed prompt ``name``.

        Raises:
            PromptNotFound: no such prompt.
        """
        self._current()
        try:
            return self._prompts[name]
        except KeyError:
            raise PromptNotFound(f"Unknown prompt: {name}") from None

    def resolve_uri(self, uri: str) -> Target:
        """The server and original URI of an exposed resource URI (listed, or matching a template).

        Raises:
            ResourceNotFound: the URI belongs to no server.
        """
        self._current()
        if uri in self._uris:
            return self._uris[uri]
        if self._prefixed:
            parts = split_uri(uri)
            if parts is not None and self._by_alias.get(parts[0]) in self._prefixed:
                return Target(self._by_alias[parts[0]], parts[1])
        plain = [server for server in self._order if server not in self._prefixed]
        for server in plain:
            listing = self.listings.get(server)
            if listing is not None and (listing.templates or listing.resources):
                return Target(server, uri)
        if len(plain) == 1:
            return Target(plain[0], uri)
        raise ResourceNotFound(f"Resource not found: {uri}", uri)


def _claim(table: dict[str, Target], name: str, target: Target, what: str) -> bool:
    if name in table:
        logger.warning("%s %s of server %s hidden by server %s", what, name, target.server, table[name].server)
        return False
    table[name] = target
    return True
