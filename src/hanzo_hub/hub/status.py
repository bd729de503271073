"""What the hub's clients can learn about its downstream servers: which run, which fail, and why.

A client (or the model behind it) otherwise sees only tools that are missing or calls that fail. The hub lists one
resource of its own, :data:`STATUS_URI` (``hub://_hub/servers``; no server alias can start with ``_``), whose JSON
names every server the hub serves with its transport, state, health, exposed counts, failures, when it will be tried
again, its last error and what of its lists was repaired or dropped for breaking the protocol, redacted like
everything else bound for a client. ``find_tools`` adds the same reasons for chosen tools whose server cannot answer
now (:func:`unavailable_tools`), so a model can pick another tool before it calls one that will fail.

Health is one word per server:
- ``ok``: running, or not started yet (servers start on first use) with no failure behind it;
- ``failing``: its last start or connection failed; the next use tries again after ``retry_in_s``;
- ``unavailable``: the circuit breaker is open after repeated failures; calls fail at once until ``retry_in_s``;
- ``needs_login``: a remote server that wants an OAuth login (``hanzo-hub auth login NAME``, or its login tool).
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from hanzo_hub import __version__
from hanzo_hub.errors import HubError
from hanzo_hub.hub.login_prompt import LOGIN_TOOL
from hanzo_hub.hub.naming import expose_name

if TYPE_CHECKING:
    from hanzo_hub.hub.core import Hub

__all__ = [
    "STATUS_URI",
    "health",
    "server_status",
    "status_resource",
    "status_result",
    "unavailable_tools",
    "watch_status",
]

STATUS_URI = "hub://_hub/servers"
_STARTED = time.monotonic()
WATCH_INTERVAL = 1.0
"""How often the hub looks for a change worth a ``notifications/resources/updated`` of :data:`STATUS_URI`."""
_WATCHED_FIELDS = (
    "health",
    "state",
    "failures",
    "starts",
    "last_error",
    "circuit_open",
    "needs_login",
    "exposed",
    "list_problems",
)
"""What a subscriber hears about when it changes; calls in flight and countdowns change too often to be news."""


def health(hub: Hub) -> dict[str, Any]:
    """What ``/healthz`` reports: counts, and each server's status (the caller trims what it shows)."""
    servers = hub.pool.status()
    return {
        "status": "ok",
        "servers": len(servers),
        "running": sum(1 for s in servers.values() if s["state"] == "running"),
        "tools": len(hub.registry.tools()),
        "detail": servers,
    }


_watching: weakref.WeakSet[Hub] = weakref.WeakSet()


def status_resource() -> types.Resource:
    """The status resource as ``resources/list`` shows it."""
    return types.Resource(
        uri=STATUS_URI,
        name="hub-servers",
        title="hanzo-hub: downstream servers",
        description=(
            "Every server this hub serves: transport, state, health (ok, failing, unavailable, needs_login), exposed "
            "tool counts, failures, when it is tried again, and its last error. Read it when a tool is missing or "
            "its calls fail; subscribe to it to hear when a server's health changes."
        ),
        mime_type="application/json",
    )


def _health(status: dict[str, Any]) -> str:
    if status["needs_login"]:
        return "needs_login"
    if status["circuit_open"]:
        return "unavailable"
    if status["failures"] and status["state"] != "running":
        return "failing"
    return "ok"


def _reason(hub: Hub, name: str, status: dict[str, Any]) -> str | None:
    health = _health(status)
    if health == "needs_login":
        tool = expose_name(LOGIN_TOOL, hub.registry.alias(name) if hub.registry.prefixed(name) else None)
        return f"needs an OAuth login: call {tool}, or run `hanzo-hub auth login {name}`"
    if health == "ok":
        return None
    retry = f"tried again in {status['retry_in_s']:.0f} s" if status["retry_in_s"] else "tried again on next use"
    word = "unavailable" if health == "unavailable" else "failing"
    return _redacted(hub, f"{word} after {status['failures']} failed start(s), {retry}: {status['last_error']}")


def _redacted(hub: Hub, text: str | None) -> str | None:
    redact = hub.guard.redact
    return redact(text) if redact is not None and text is not None else text


def server_status(hub: Hub) -> dict[str, Any]:
    """The status report: the hub, then one entry per server, redacted."""
    pool = hub.pool.status()
    servers: dict[str, Any] = {}
    for name in sorted(hub.servers):
        spec, status = hub.servers[name], pool.get(name)
        if status is None:  # between a reload's removal and its re-adding
            continue
        listing = hub.registry.listings.get(name)
        info = (listing.server_info or {}) if listing is not None else {}
        servers[name] = {
            "alias": hub.registry.alias(name),
            "transport": spec.kind,
            "own": name in hub.own,
            "health": _health(status),
            "reason": _reason(hub, name, status),
            **status,
            "last_error": _redacted(hub, status["last_error"]),
            "exposed": hub.registry.counts(name),
            "listed_from": listing.source if listing is not None else None,
            "list_problems": list(listing.problems) if listing is not None else [],
            "server_info": {k: info[k] for k in ("name", "version") if k in info} or None,
        }
    healths = [entry["health"] for entry in servers.values()]
    return {
        "hub": {
            "version": __version__,
            "process_uptime_s": round(time.monotonic() - _STARTED, 1),
            "servers": len(servers),
            "running": sum(1 for entry in servers.values() if entry["state"] == "running"),
            **{word: healths.count(word) for word in ("failing", "unavailable", "needs_login")},
        },
        "servers": servers,
    }


def status_result(hub: Hub) -> types.ReadResourceResult:
    """``resources/read`` of :data:`STATUS_URI`."""
    text = json.dumps(server_status(hub), indent=2)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=STATUS_URI, mime_type="application/json", text=text)]
    )


def unavailable_tools(hub: Hub, names: Iterable[str]) -> dict[str, str]:
    """For exposed tool names, why each one whose server cannot answer now will fail (healthy ones are left out)."""
    pool = hub.pool.status()
    out: dict[str, str] = {}
    for name in names:
        try:
            server = hub.registry.resolve_tool(name).server
        except HubError:
            continue
        status = pool.get(server)
        reason = _reason(hub, server, status) if status is not None else None
        if reason is not None:
            out[name] = reason
    return out


def _fingerprint(hub: Hub) -> str:
    report = server_status(hub)["servers"]
    return json.dumps({name: [entry[f] for f in _WATCHED_FIELDS] for name, entry in report.items()}, sort_keys=True)


async def _watch(hub: Hub) -> None:
    last: str | None = None
    while True:
        await anyio.sleep(WATCH_INTERVAL)
        if STATUS_URI not in hub.relay.subscribed():
            last = None  # nobody listens: no report is built
            continue
        now = _fingerprint(hub)
        if last is not None and now != last:
            await hub.relay.resource_updated(STATUS_URI)
        last = now


def watch_status(hub: Hub) -> None:
    """Tell the clients subscribed to :data:`STATUS_URI` (both eras) when a server starts, stops, fails, recovers, opens
    or closes its circuit, needs a login or lists differently: a task in the hub's task group compares the report
    every :data:`WATCH_INTERVAL` seconds while someone is subscribed (the first comparison is a tick after the first
    subscription). Once per hub, however many front servers are built on it."""
    if hub in _watching:
        return
    _watching.add(hub)
    hub.background(lambda: _watch(hub))
