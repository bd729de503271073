"""Conformance-suite client (``conformance client --command "python tests/conformance/client.py"``) through the hub.

The suite starts a mock server per scenario and runs ``client.py <url>`` with ``MCP_CONFORMANCE_SCENARIO``,
``MCP_CONFORMANCE_PROTOCOL_VERSION`` and ``MCP_CONFORMANCE_CONTEXT`` (JSON) set. This script builds a hub whose only
downstream is ``<url>`` (streamable HTTP; ``protocol`` "legacy" for 2025-* revisions, "2026-07-28" otherwise), opens
it, and plays the scenario's client *through* the hub: an in-memory ``Client(build_server(hub))`` is the end user
(it answers elicitation with the schema's defaults, opens the hub's OAuth login page when asked to, answers
sampling with a canned message and roots with one root) and calls the tools the scenario expects. So every request
the mock server sees comes from the hub's downstream client.

It exits 0 when the scenario's client steps ran, 1 otherwise; the suite scores what the mock server saw.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext

from hanzo_hub.config import BackendSettings, HttpServerSpec, HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.login_prompt import LOGIN_TOOL
from hanzo_hub.hub.server import build_server

logger = logging.getLogger("conformance-client")

Scenario = Callable[[Client, dict[str, Any]], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(*names: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        for name in names:
            SCENARIOS[name] = fn
        return fn

    return register


# -- the end user behind the front client ---------------------------------------------------------------------------


def _value_for(schema: dict[str, Any]) -> Any:
    """The default of a property schema, else a plausible value of its type."""
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if options and isinstance(options[0], dict) and "const" in options[0]:
            return options[0]["const"]
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "array":
        items = schema.get("items") or {}
        return [_value_for(items)] if items else []
    return "conformance"


async def answer_elicitation(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept, filling every property with its schema default (SEP-1034), else a value of its type. A URL (the hub's
    OAuth login through the client) is opened as a user's browser would: a GET that follows the redirects (the
    suite's authorization server approves at once and sends the browser to the hub's loopback callback)."""
    if isinstance(params, types.ElicitRequestURLParams):
        await _open_in_browser(params.url)
        return types.ElicitResult(action="accept")
    properties = (params.requested_schema or {}).get("properties") or {}
    content = {name: _value_for(schema) for name, schema in properties.items()}
    logger.info("elicitation %r answered with %s", params.message, content)
    return types.ElicitResult(action="accept", content=content)


async def _open_in_browser(url: str) -> None:
    """The user's browser: GET ``url`` and follow every redirect (the last one lands on the hub's callback)."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=30) as browser:
        response = await browser.get(url)
    logger.info("opened the login page: %s after %d redirects", response.status_code, len(response.history))


async def answer_sampling(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    text = types.TextContent(type="text", text="This is a conformance test response.")
    return types.CreateMessageResult(role="assistant", content=text, model="conformance-model", stop_reason="endTurn")


async def answer_roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/conformance", name="conformance")])


# -- scenarios ------------------------------------------------------------------------------------------------------


def _text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def _call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
    result = await client.call_tool(name, arguments or {})
    logger.info("tools/call %s -> error=%s %s", name, result.is_error, _text(result)[:200])
    return result


@scenario("initialize")
async def initialize(client: Client, context: dict[str, Any]) -> None:
    await client.list_tools()


@scenario("tools_call")
async def tools_call(client: Client, context: dict[str, Any]) -> None:
    tools = {tool.name for tool in (await client.list_tools()).tools}
    assert "add_numbers" in tools, tools
    result = await _call(client, "add_numbers", {"a": 5, "b": 3})
    assert not result.is_error, result
    assert "8" in _text(result), result


@scenario("elicitation-sep1034-client-defaults")
async def elicitation_defaults(client: Client, context: dict[str, Any]) -> None:
    result = await _call(client, "test_client_elicitation_defaults")
    assert not result.is_error, result
    assert "Elicitation completed" in _text(result), result


def _ppid(pid: int) -> int:
    """The parent of ``pid`` (Linux ``/proc``)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _other_scenario_clients() -> int:
    """How many other scenario clients the suite runs right now: its children besides this one.

    The suite spawns each client through a shell, which may or may not ``exec`` us; 0 when ``/proc`` cannot tell.
    """
    try:
        mine = os.getpid()
        parent = os.getppid()
        if Path(f"/proc/{parent}/comm").read_text().strip() != "node":
            mine, parent = parent, _ppid(parent)
        others = 0
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != mine:
                try:
                    others += _ppid(int(entry.name)) == parent
                except (OSError, ValueError, IndexError):
                    continue  # the process ended meanwhile
        return others
    except (OSError, ValueError, IndexError):
        return 0


async def _settle(limit: float = 60.0, calm_ticks: int = 10) -> None:
    """Wait, at most ``limit`` seconds, until the suite runs no other scenario client and our timers fire on time.

    ``--requirements`` starts every scenario's client at once (25 to 39 Python processes). On a small machine that
    burst delays timers by hundreds of milliseconds, in the suite's mock server as much as here (its 50 ms stream
    close once fired 1.3 s late), and ``sse-retry`` scores the reconnection delay to within +200 ms of the server's
    ``retry``. Waiting keeps the machine's load out of that measurement; what is measured stays the hub's own
    reconnection.
    """
    began = anyio.current_time()
    deadline = began + limit
    others = first = _other_scenario_clients()
    while others and anyio.current_time() < deadline:
        await anyio.sleep(0.2)  # polling: the suite's other children announce nothing when they exit
        others = _other_scenario_clients()
    calm = 0
    while calm < calm_ticks and anyio.current_time() < deadline:
        start = anyio.current_time()
        await anyio.sleep(0.05)
        calm = calm + 1 if anyio.current_time() - start < 0.06 else 0
    logger.info(
        "settled in %.1f s: %d other scenario clients at first, %d now; %d punctual ticks",
        anyio.current_time() - began,
        first,
        others,
        calm,
    )


@scenario("sse-retry")
async def sse_retry(client: Client, context: dict[str, Any]) -> None:
    await _settle()
    result = await _call(client, "test_reconnection")
    assert not result.is_error, result


@scenario("request-metadata")
async def request_metadata(client: Client, context: dict[str, Any]) -> None:
    await client.list_tools()


@scenario("sep-2322-client-request-state")
async def request_state(client: Client, context: dict[str, Any]) -> None:
    for name, expected in (
        ("test_mrtr_echo_state", "echo-state-ok"),
        ("test_mrtr_no_state", "no-state-ok"),
        ("test_mrtr_unrelated", "unrelated-ok"),
        ("test_mrtr_no_result_type", "no-result-type-test-ok"),
    ):
        result = await _call(client, name)
        assert expected in _text(result), (name, result)


@scenario("http-standard-headers")
async def standard_headers(client: Client, context: dict[str, Any]) -> None:
    for tool in (await client.list_tools()).tools:
        await _call(client, tool.name)
    for resource in (await client.list_resources()).resources:
        await client.read_resource(str(resource.uri))
    for prompt in (await client.list_prompts()).prompts:
        await client.get_prompt(prompt.name)


@scenario("http-custom-headers")
async def custom_headers(client: Client, context: dict[str, Any]) -> None:
    await client.list_tools()
    for call in context.get("toolCalls") or []:
        result = await _call(client, call["name"], call.get("arguments"))
        assert not result.is_error, result


@scenario("http-invalid-tool-headers")
async def invalid_tool_headers(client: Client, context: dict[str, Any]) -> None:
    """Call every tool the hub exposes: the hub must have dropped those with invalid ``x-mcp-header``s."""
    tools = (await client.list_tools()).tools
    logger.info("exposed tools: %s", [tool.name for tool in tools])
    for tool in tools:
        properties = (tool.input_schema or {}).get("properties") or {}
        await _call(client, tool.name, {name: _value_for(schema) for name, schema in properties.items()})


@scenario("json-schema-ref-no-deref")
async def ref_no_deref(client: Client, context: dict[str, Any]) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    schema = tools["lookup_user"].input_schema
    assert schema["properties"]["profile"]["$ref"].endswith("/canary/profile-schema.json"), schema
    assert schema["properties"]["id"] == {"$ref": "#/$defs/userId"}, schema


@scenario("json-schema-2020-12-preservation")
async def schema_preservation(client: Client, context: dict[str, Any]) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    focal = tools["json_schema_2020_12_tool"].input_schema
    await _call(client, "json_schema_echo", {"schema": focal})


async def default_scenario(client: Client, context: dict[str, Any]) -> None:
    """Unknown scenarios (e.g. ``auth/*``): list and call the tools, as a plain client would. A server that needs an
    OAuth login lists only the hub's ``login`` tool: the user calls it (and approves in the browser), then the
    server's own tools are listed and called."""
    logins = [tool.name for tool in (await client.list_tools()).tools if tool.name.split("__")[-1] == LOGIN_TOOL]
    for name in logins:
        logger.info("login: %s", _text(await _call(client, name)))
    for tool in (await client.list_tools()).tools:
        if tool.name.split("__")[-1] != LOGIN_TOOL:
            await _call(client, tool.name)


CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""The Client ID Metadata Document the suite's ``auth/basic-cimd`` expects as the client_id (it fetches nothing)."""


# -- the hub --------------------------------------------------------------------------------------------------------


def downstream_protocol(version: str) -> Any:
    """The hub's ``protocol`` for the downstream: the handshake for 2025-* revisions, else the pinned version.

    ``HANZO_CONFORMANCE_DOWNSTREAM_PROTOCOL`` (``legacy``, ``auto`` or a version) overrides it, for manual checks.
    """
    override = os.environ.get("HANZO_CONFORMANCE_DOWNSTREAM_PROTOCOL")
    if override:
        return override
    return "legacy" if version.startswith("2025-") else version


async def run(url: str, scenario_name: str, version: str, context: dict[str, Any], home: Path) -> None:
    # A scenario with a client registered by hand (auth/pre-registration) names it in its context: the hub's
    # config carries it as a user would write it (``oauth.client_id``, ``oauth.client_secret``).
    oauth = {key: context[key] for key in ("client_id", "client_secret") if key in context} or None
    if scenario_name == "auth/basic-cimd":  # a user who publishes a Client ID Metadata Document configures its URL
        oauth = {"client_metadata_url": CIMD_URL}
    spec = HttpServerSpec.model_validate({"url": url, "protocol": downstream_protocol(version), "oauth": oauth})
    # A generous list wait: under the suite's parallel start-up a first listing can take longer than the default.
    settings = HubSettings(home=home, servers={"conformance": spec}, backends=BackendSettings(list_wait=60))
    handler = SCENARIOS.get(scenario_name, default_scenario)
    front_mode = "legacy" if version.startswith("2025-") else "auto"
    async with (
        Hub.open(settings) as hub,
        Client(
            build_server(hub),
            mode=front_mode,
            elicitation_callback=answer_elicitation,
            sampling_callback=answer_sampling,
            list_roots_callback=answer_roots,
        ) as client,
    ):
        await hub.wait_discovered()
        logger.info("front client speaks %s; scenario %s", client.protocol_version, scenario_name)
        await handler(client, context)


def main() -> int:
    logging.basicConfig(level=os.environ.get("CONFORMANCE_CLIENT_LOG", "INFO"), stream=sys.stderr)
    if len(sys.argv) != 2:
        print("usage: client.py URL (run by the conformance suite)", file=sys.stderr)
        return 2
    url = sys.argv[1]
    scenario_name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "2025-11-25"
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="hanzo-conformance-") as home:
        try:
            anyio.run(run, url, scenario_name, version, context, Path(home))
        except Exception:
            logger.exception("scenario %s failed", scenario_name)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
