"""What one downstream server offers: tools, resources, templates, prompts, and how to fetch them."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client, MCPError
from pydantic import ValidationError

from hanzo_hub.backends.lenient import LIST_METHODS, Problems, checked, checked_dicts, lenient_page
from hanzo_hub.errors import BackendError
from hanzo_hub.sandbox.vault import redacted_data

logger = logging.getLogger(__name__)

MAX_PAGES = 100
"""A paginator that never ends cannot hang discovery."""


@dataclass(frozen=True)
class Listing:
    """One server's lists, from a snapshot or from the live server."""

    tools: tuple[types.Tool, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()
    server_info: dict[str, Any] | None = None
    instructions: str | None = None
    source: Literal["snapshot", "live"] = "live"
    capabilities: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """What was repaired or dropped of the server's lists because it broke the protocol (``backends/lenient.py``)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (wire field names)."""

        def dump(items: tuple[Any, ...]) -> list[dict[str, Any]]:
            return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]

        return {
            "tools": dump(self.tools),
            "resources": dump(self.resources),
            "resourceTemplates": dump(self.templates),
            "prompts": dump(self.prompts),
            "serverInfo": self.server_info,
            "instructions": self.instructions,
            "capabilities": self.capabilities,
            "problems": list(self.problems),
        }

    @classmethod
    def from_json(
        cls, data: dict[str, Any], source: Literal["snapshot", "live"] = "snapshot", server: str = "?"
    ) -> Listing:
        """Parse the form written by ``to_json``, repairing or dropping items that break the protocol (a snapshot
        written before the hub checked them; ``backends/lenient.py``)."""

        problems = Problems(server)

        def items(method: str, model: Any) -> tuple[Any, ...]:
            raw = data.get(LIST_METHODS[method][0]) or []
            return tuple(model.model_validate(item) for item in checked_dicts(method, list(raw), problems))

        known = [str(note) for note in data.get("problems") or ()]
        return cls(
            tools=items("tools/list", types.Tool),
            resources=items("resources/list", types.Resource),
            templates=items("resources/templates/list", types.ResourceTemplate),
            prompts=items("prompts/list", types.Prompt),
            server_info=data.get("serverInfo"),
            instructions=data.get("instructions"),
            capabilities=data.get("capabilities") or {},
            source=source,
            problems=tuple(dict.fromkeys([*known, *problems.notes])),
        )

    def redacted(self, redact: Callable[[str], str]) -> Listing:
        """This listing with ``redact`` applied to every string of it (``self`` when nothing matched), so a secret
        a server puts in a description reaches neither a snapshot nor a client."""
        data = self.to_json()
        clean = redacted_data(data, redact)
        return self if clean == data else Listing.from_json(clean, source=self.source)

    def content_hash(self) -> str:
        """A hash of the lists (not of where they came from), to tell whether a live list differs."""
        body = self.to_json()
        body.pop("serverInfo", None)
        body.pop("instructions", None)
        body.pop("capabilities", None)
        body.pop("problems", None)
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


async def fetch_listing(client: Client, timeout: float, server: str | None = None) -> Listing:
    """Fetch every list the server's capabilities announce, page by page, within ``timeout`` seconds; items that
    break the protocol are repaired or dropped with a warning naming ``server`` (``backends/lenient.py``).

    Raises:
        TimeoutError: the server took longer.
        MCPError: the server refused a list it announced.
        BackendError: the server answered a list with something that is not a list result.
    """
    caps = client.server_capabilities
    tools: list[types.Tool] = []
    resources: list[types.Resource] = []
    templates: list[types.ResourceTemplate] = []
    prompts: list[types.Prompt] = []

    problems = Problems(server or (client.server_info.name if client.server_info else "?"))

    async def walk(method: Any, attr: str, into: list[Any], wire: str) -> None:
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            try:
                page = await method(cursor=cursor, cache_mode="refresh")
                items, next_cursor = getattr(page, attr), page.next_cursor
            except ValidationError:
                # Some items (or the page itself) break the protocol: take the page raw and keep what is sound.
                items, next_cursor = await lenient_page(client, wire, cursor, problems)
            into.extend(items)
            cursor = next_cursor
            if cursor is None:
                return

    async def optional(method: Any, attr: str, into: list[Any], wire: str) -> None:
        """A list the capabilities imply but servers often lack: refusing it or answering junk means "none"."""
        try:
            await walk(method, attr, into, wire)
        except MCPError as exc:
            if exc.code != types.METHOD_NOT_FOUND:
                raise
        except BackendError:
            problems.add(f"its {wire} answer is not a list result, taken as empty")
            into.clear()

    with anyio.fail_after(timeout):
        async with anyio.create_task_group() as tg:
            if caps.tools is not None:
                tg.start_soon(walk, client.list_tools, "tools", tools, "tools/list")
            if caps.resources is not None:
                tg.start_soon(walk, client.list_resources, "resources", resources, "resources/list")
                tg.start_soon(
                    optional,
                    client.list_resource_templates,
                    "resource_templates",
                    templates,
                    "resources/templates/list",
                )
            if caps.prompts is not None:
                tg.start_soon(walk, client.list_prompts, "prompts", prompts, "prompts/list")
    info = client.server_info
    return Listing(
        tools=checked("tools/list", tools, problems),
        resources=checked("resources/list", resources, problems),
        templates=checked("resources/templates/list", templates, problems),
        prompts=checked("prompts/list", prompts, problems),
        server_info=info.model_dump(mode="json", by_alias=True, exclude_none=True) if info else None,
        instructions=client.instructions,
        capabilities=caps.model_dump(mode="json", by_alias=True, exclude_none=True),
        source="live",
        problems=tuple(dict.fromkeys(problems.notes)),
    )


async def discover_pinned(client: Client, version: str) -> None:
    """Learn a version-pinned server's capabilities: probe ``server/discover`` at exactly ``version`` and adopt it.

    A client in a version-pin mode adopts a synthesized discover result that declares no capabilities, so without
    this the hub would list nothing. A ``-32022`` answer that names ``version`` as supported is retried once (the
    spec lets a client retry with a version the server supports); any other refusal fails the start.

    Raises:
        MCPError: the server refused ``server/discover`` or does not support ``version``.
    """
    try:
        raw = await client.session.send_discover(version)
    except MCPError as exc:
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        if exc.code != types.UNSUPPORTED_PROTOCOL_VERSION or version not in (data.get("supported") or ()):
            raise
        raw = await client.session.send_discover(version)
    result = types.DiscoverResult.model_validate(raw)
    if version not in result.supported_versions:
        raise MCPError(
            types.UNSUPPORTED_PROTOCOL_VERSION,
            f"server supports {', '.join(result.supported_versions)}, not the configured {version}",
        )
    client.session.adopt(result.model_copy(update={"supported_versions": [version]}))
