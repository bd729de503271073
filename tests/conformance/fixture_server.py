"""Conformance fixture server: every fixture the official MCP conformance suite's server scenarios call.

Built on the SDK's high-level `MCPServer`, it serves both protocol eras from one endpoint: the
2025-11-25 handshake era (sessions, server-to-client sampling/elicitation, logging, resource
subscriptions) and the 2026-07-28 stateless era (`server/discover`, `InputRequiredResult`
multi-round-trip requests, `subscriptions/listen`). Tools that need client input pick the
mechanism from the request's protocol version, so the fixture also works behind a hub.

Usage:
    python tests/conformance/fixture_server.py --port 8931 [--host 127.0.0.1]   # streamable HTTP at /mcp
    python tests/conformance/fixture_server.py --stdio                           # stdio

Import `build_fixture_server()` to mount it in-process or to run it as a downstream.
"""

import argparse
import asyncio
import base64
import json
import warnings
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeAlias

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, Message, UserMessage
from mcp.server.mcpserver.tools import Tool
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

SERVER_NAME = "hanzo-conformance-fixture"
SERVER_VERSION = "1.0.0"
WATCHED_URI = "test://watched-resource"

# A 1x1 PNG and a minimal (header-only) WAV file.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_B64 = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="

_STRING = {"type": "string"}


def _object(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    return {**schema, "required": list(required)} if required else schema


def _titled(titles: list[str]) -> list[dict[str, str]]:
    return [{"const": f"value{i}", "title": title} for i, title in enumerate(titles, 1)]


# Tool inputSchema exercising JSON Schema 2020-12 keywords that must survive listing (SEP-1613, SEP-2106).
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    **_object(
        {
            "name": _STRING,
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": _STRING,
            "email": _STRING,
        }
    ),
    "$defs": {"address": {"$anchor": "addressDef", **_object({"street": _STRING, "city": _STRING})}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
# Elicitation schema with a default for every primitive type (SEP-1034).
SEP1034_SCHEMA = _object(
    {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"]}
        | {"default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    }
)
# Elicitation schema with all five enum variants (SEP-1330).
SEP1330_SCHEMA = _object(
    {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": _titled(["First Option", "Second Option", "Third Option"])},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"]}
        | {"enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": _titled(["First Choice", "Second Choice", "Third Choice"])},
        },
    }
)
USER_INFO_SCHEMA = _object(
    {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "username",
    "email",
)
CONFIRM_SCHEMA = _object({"ok": {"type": "boolean"}}, "ok")

Reply: TypeAlias = str | InputRequiredResult
"""A tool's answer: its text, or the `InputRequiredResult` that asks the client for input first."""


class InMemoryEventStore(EventStore):
    """Bounded in-memory event store, so SSE streams are resumable with `Last-Event-ID` (SEP-1699)."""

    def __init__(self, max_events: int = 10_000) -> None:
        """Create an empty store.

        Args:
            max_events: Oldest events are dropped beyond this many.
        """
        self._events: deque[tuple[StreamId, int, types.JSONRPCMessage | None]] = deque(maxlen=max_events)
        self._next_id = 0

    async def store_event(self, stream_id: StreamId, message: types.JSONRPCMessage | None) -> EventId:
        """Store one event (`None` is a priming event) and return its id."""
        self._next_id += 1
        self._events.append((stream_id, self._next_id, message))
        return str(self._next_id)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Replay the events of `last_event_id`'s stream that came after it."""
        after = int(last_event_id) if last_event_id.isdigit() else -1
        stream = next((s for s, event_id, _ in self._events if event_id == after), None)
        if stream is None:
            return None
        for s, event_id, message in list(self._events):
            if s == stream and event_id > after and message is not None:
                await send_callback(EventMessage(message, str(event_id)))
        return stream


@contextmanager
def _deprecated_ok() -> Iterator[None]:
    """Silence `MCPDeprecationWarning` for the handshake-era APIs this fixture must exercise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


def _is_modern(ctx: Context) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _result(*blocks: types.ContentBlock, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(blocks), is_error=is_error)


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG_B64, mime_type="image/png")


def _embedded(uri: str, text: str, mime_type: str = "text/plain") -> types.EmbeddedResource:
    resource = types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return types.EmbeddedResource(type="resource", resource=resource)


def _elicit_request(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def _sampling_request(prompt: str, max_tokens: int = 100) -> types.CreateMessageRequest:
    messages = [types.SamplingMessage(role="user", content=_text(prompt))]
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=messages, max_tokens=max_tokens))


def _require(ctx: Context, capability: str) -> None:
    """Raise MissingRequiredClientCapabilityError (-32021) unless the client declared `capability`."""
    if getattr(ctx.client_capabilities or types.ClientCapabilities(), capability) is None:
        required = types.ClientCapabilities.model_validate({capability: {}})
        raise MCPError(
            code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"This tool requires the client {capability} capability",
            data={"requiredCapabilities": required.model_dump(by_alias=True, exclude_none=True)},
        )


_RESULT_TYPES: dict[str, type[types.InputResponse]] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}


async def _ask(
    ctx: Context, requests: types.InputRequests, state: str | None = None
) -> dict[str, types.InputResponse] | InputRequiredResult:
    """Get the client's answers to `requests` in either protocol era.

    On 2025-11-25 each request is sent to the client as a standalone server-to-client request on the
    calling request's stream. On 2026-07-28 the answers come from the retry's `inputResponses`; while
    any is missing (or the echoed `requestState` is not `state`) an `InputRequiredResult` asks for them.

    Args:
        ctx: The calling request's context.
        requests: The input requests, keyed by the server-chosen ids the answers come back under.
        state: The `requestState` to send with the questions and to expect on the retry.

    Returns:
        The answers by key, or the `InputRequiredResult` for the handler to return.
    """
    if not _is_modern(ctx):
        meta = ServerMessageMetadata(related_request_id=ctx.request_context.request_id)
        return {
            key: await ctx.session.send_request(request, _RESULT_TYPES[request.method], metadata=meta)
            for key, request in requests.items()
        }
    answers = {key: answer for key in requests if (answer := (ctx.input_responses or {}).get(key)) is not None}
    if len(answers) < len(requests) or ctx.request_state != state:
        missing = {key: request for key, request in requests.items() if key not in answers}
        return InputRequiredResult(input_requests=missing or requests, request_state=state)
    return answers


def _content(answer: types.InputResponse) -> dict[str, Any]:
    """The accepted content of an elicitation answer (empty if declined, cancelled or not an elicitation)."""
    return (answer.content or {}) if isinstance(answer, types.ElicitResult) else {}


def _sampled(answer: types.InputResponse) -> str:
    """The text of a sampling answer."""
    content = getattr(answer, "content", None)
    return content.text if isinstance(content, types.TextContent) else f"<{type(content).__name__}>"


async def _elicit(ctx: Context, key: str, message: str, schema: dict[str, Any]) -> Reply:
    """Elicit `schema` from the user; returns `action=..., content=...` or the `InputRequiredResult`."""
    _require(ctx, "elicitation")
    answers = await _ask(ctx, {key: _elicit_request(message, schema)})
    if isinstance(answers, InputRequiredResult):
        return answers
    answer = answers[key]
    action = answer.action if isinstance(answer, types.ElicitResult) else "?"
    return f"action={action}, content={json.dumps(_content(answer))}"


async def _sample(ctx: Context, key: str, prompt: str) -> Reply:
    """Sample the client's LLM; returns `LLM response: ...` or the `InputRequiredResult`."""
    _require(ctx, "sampling")
    answers = await _ask(ctx, {key: _sampling_request(prompt)})
    return answers if isinstance(answers, InputRequiredResult) else f"LLM response: {_sampled(answers[key])}"


async def _log(ctx: Context, message: str) -> None:
    """Send an info log notification (dropped on 2026-07-28 unless the request opted in via `_meta`)."""
    with _deprecated_ok():
        pending = ctx.session.send_log_message("info", message, related_request_id=ctx.request_context.request_id)
    await pending


def _register_content_tools(server: MCPServer) -> None:
    @server.tool()
    def test_simple_text() -> types.CallToolResult:
        """Returns a single text content block."""
        return _result(_text("This is a simple text response for testing."))

    @server.tool()
    def test_image_content() -> types.CallToolResult:
        """Returns a 1x1 PNG image content block."""
        return _result(_image())

    @server.tool()
    def test_audio_content() -> types.CallToolResult:
        """Returns a minimal WAV audio content block."""
        return _result(types.AudioContent(type="audio", data=WAV_B64, mime_type="audio/wav"))

    @server.tool()
    def test_embedded_resource() -> types.CallToolResult:
        """Returns an embedded text resource."""
        return _result(_embedded("test://embedded-resource", "This is an embedded resource content."))

    @server.tool()
    def test_multiple_content_types() -> types.CallToolResult:
        """Returns text, image and embedded resource content together."""
        data = json.dumps({"test": "data", "value": 123})
        return _result(
            _text("Multiple content types test:"),
            _image(),
            _embedded("test://mixed-content-resource", data, "application/json"),
        )

    @server.tool()
    def test_error_handling() -> types.CallToolResult:
        """Always fails with a tool execution error (isError: true)."""
        return _result(_text("This tool intentionally returns an error for testing"), is_error=True)

    @server.tool()
    def test_header_echo(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Echoes `region`, which clients mirror into the Mcp-Param-Region header (SEP-2243)."""
        return f"region={region}"


def _json_schema_2020_12_tool() -> Tool:
    """A tool whose advertised inputSchema uses JSON Schema 2020-12 keywords."""

    def json_schema_2020_12_tool(
        name: str | None = None,
        address: dict[str, Any] | None = None,
        contactMethod: str | None = None,
        phone: str | None = None,
        email: str | None = None,
    ) -> str:
        """Tool with JSON Schema 2020-12 features."""
        return f"received {json.dumps({'name': name, 'contactMethod': contactMethod})}"

    tool = Tool.from_function(json_schema_2020_12_tool, structured_output=False)
    tool.parameters = JSON_SCHEMA_2020_12  # advertised as written; arguments still validate against the signature
    return tool


def _register_notifying_tools(server: MCPServer) -> None:
    @server.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Sends three info log notifications, 50 ms apart, while running."""
        for i, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            await asyncio.sleep(0.05 if i else 0)
            await _log(ctx, message)
        return "Tool with logging executed successfully"

    @server.tool()
    async def test_logging_tool(ctx: Context) -> str:
        """Logs at info level; on 2026-07-28 nothing may be sent unless `_meta` sets a log level."""
        await _log(ctx, "test_logging_tool ran")
        return "logged"

    @server.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Reports progress 0, 50 and 100 of 100 against the caller's progress token, 50 ms apart."""
        for step in (0, 50, 100):
            await asyncio.sleep(0.05 if step else 0)
            await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        return "Tool with progress executed successfully"

    @server.tool()
    async def test_reconnection(ctx: Context) -> str:
        """Closes the SSE stream mid-call; the result arrives after the client resumes (SEP-1699)."""
        await ctx.close_sse_stream()
        await asyncio.sleep(0.2)
        return "Reconnection test completed"


def _register_list_changing_tools(server: MCPServer) -> None:
    """Tools that change the tool or prompt list and notify `list_changed` in both eras."""

    async def test_dynamic_tool() -> str:
        """Present or absent depending on test_trigger_tool_change."""
        return "dynamic tool called"

    def test_dynamic_prompt() -> str:
        """Present or absent depending on test_trigger_prompt_change."""
        return "dynamic prompt"

    server.add_tool(test_dynamic_tool)
    present = {"tool": True, "prompt": False}

    @server.tool()
    async def test_trigger_tool_change(ctx: Context) -> str:
        """Toggles test_dynamic_tool and notifies tools/list_changed in both eras."""
        if present["tool"]:
            server.remove_tool("test_dynamic_tool")
        else:
            server.add_tool(test_dynamic_tool)
        present["tool"] = not present["tool"]
        await ctx.notify_tools_changed()  # subscriptions/listen streams (2026-07-28)
        if not _is_modern(ctx):
            await ctx.session.send_tool_list_changed()  # the session's GET stream (2025-11-25)
        return f"test_dynamic_tool present: {present['tool']}"

    @server.tool()
    async def test_trigger_prompt_change(ctx: Context) -> str:
        """Toggles test_dynamic_prompt and notifies prompts/list_changed in both eras."""
        if present["prompt"]:
            server.remove_prompt("test_dynamic_prompt")
        else:
            server.prompt()(test_dynamic_prompt)
        present["prompt"] = not present["prompt"]
        await ctx.notify_prompts_changed()
        if not _is_modern(ctx):
            await ctx.session.send_prompt_list_changed()
        return f"test_dynamic_prompt present: {present['prompt']}"


def _register_client_input_tools(server: MCPServer) -> None:
    """Tools that need the client: standalone requests on 2025-11-25, `InputRequiredResult` on 2026-07-28."""

    @server.tool(structured_output=False)
    async def test_sampling(prompt: str, ctx: Context) -> Reply:
        """Asks the client's LLM to complete `prompt` and returns its answer."""
        return await _sample(ctx, "sampling", prompt)

    @server.tool(structured_output=False)
    async def test_missing_capability(ctx: Context) -> Reply:
        """Needs the client sampling capability; without it fails with -32021 (HTTP 400)."""
        return await _sample(ctx, "sampling", "Say hello")

    @server.tool(structured_output=False)
    async def test_elicitation(message: str, ctx: Context) -> Reply:
        """Asks the user for a username and email address."""
        result = await _elicit(ctx, "user_info", message, USER_INFO_SCHEMA)
        return result if isinstance(result, InputRequiredResult) else f"User response: {result}"

    @server.tool(structured_output=False)
    async def test_elicitation_sep1034_defaults(ctx: Context) -> Reply:
        """Elicits with a default value for every primitive type (SEP-1034)."""
        result = await _elicit(ctx, "defaults", "Please provide user information", SEP1034_SCHEMA)
        return result if isinstance(result, InputRequiredResult) else f"Elicitation completed: {result}"

    @server.tool(structured_output=False)
    async def test_elicitation_sep1330_enums(ctx: Context) -> Reply:
        """Elicits with all five enum schema variants (SEP-1330)."""
        result = await _elicit(ctx, "enums", "Please select options", SEP1330_SCHEMA)
        return result if isinstance(result, InputRequiredResult) else f"Elicitation completed: {result}"

    @server.tool(structured_output=False)
    async def test_streaming_elicitation(ctx: Context) -> Reply:
        """Elicits a confirmation; on 2026-07-28 only via InputRequiredResult, never a standalone request."""
        return await _elicit(ctx, "confirm", "Please confirm", CONFIRM_SCHEMA)


def _register_input_required_tools(server: MCPServer) -> None:
    """The multi-round-trip (SEP-2322) fixtures; on 2025-11-25 they ask with standalone requests instead."""
    name_request = _elicit_request("What is your name?", _object({"name": _STRING}, "name"))

    @server.tool(structured_output=False)
    async def test_input_required_result_elicitation(ctx: Context) -> Reply:
        """Round 1 asks for the user's name; round 2 greets them."""
        answers = await _ask(ctx, {"user_name": name_request})
        if isinstance(answers, InputRequiredResult):
            return answers
        return f"Hello, {_content(answers['user_name']).get('name', 'stranger')}!"

    @server.tool(structured_output=False)
    async def test_input_required_result_sampling(ctx: Context) -> Reply:
        """Round 1 asks the client's LLM a question; round 2 returns the answer."""
        answers = await _ask(ctx, {"capital_question": _sampling_request("What is the capital of France?")})
        if isinstance(answers, InputRequiredResult):
            return answers
        return f"LLM response: {_sampled(answers['capital_question'])}"

    @server.tool(structured_output=False)
    async def test_input_required_result_list_roots(ctx: Context) -> Reply:
        """Round 1 asks for the client's roots; round 2 lists them."""
        answers = await _ask(ctx, {"client_roots": types.ListRootsRequest()})
        if isinstance(answers, InputRequiredResult):
            return answers
        roots = answers["client_roots"]
        return (
            "Roots: " + ", ".join(str(r.uri) for r in roots.roots) if isinstance(roots, types.ListRootsResult) else ""
        )

    @server.tool(structured_output=False)
    async def test_input_required_result_multiple_inputs(ctx: Context) -> Reply:
        """Asks for an elicitation, a sampling and a roots/list answer in one round."""
        requests: types.InputRequests = {
            "user_name": name_request,
            "greeting": _sampling_request("Generate a greeting", max_tokens=50),
            "client_roots": types.ListRootsRequest(),
        }
        answers = await _ask(ctx, requests, state="multiple-inputs")
        return answers if isinstance(answers, InputRequiredResult) else f"All {len(answers)} inputs received"

    @server.tool(structured_output=False)
    async def test_input_required_result_capabilities(ctx: Context) -> Reply:
        """Asks only for the kinds of input the client declared it can provide."""
        declared = ctx.client_capabilities or types.ClientCapabilities()
        offered: dict[str, tuple[object, types.InputRequest]] = {
            "sampling": (declared.sampling, _sampling_request("Say hello")),
            "elicitation": (declared.elicitation, name_request),
            "roots": (declared.roots, types.ListRootsRequest()),
        }
        requests = {key: request for key, (capability, request) in offered.items() if capability is not None}
        answers = await _ask(ctx, requests) if requests else {}
        return answers if isinstance(answers, InputRequiredResult) else f"Asked only for: {sorted(requests)}"


def _register_stateful_input_required_tools(server: MCPServer) -> None:
    """Multi-round-trip fixtures that depend on `requestState`."""
    confirm = _elicit_request("Please confirm", CONFIRM_SCHEMA)

    @server.tool(structured_output=False)
    async def test_input_required_result_request_state(ctx: Context) -> Reply:
        """Round 1 sends requestState; round 2 confirms it came back unchanged ("state-ok")."""
        answers = await _ask(ctx, {"confirm": confirm}, state="awaiting-confirmation")
        return answers if isinstance(answers, InputRequiredResult) else "state-ok: requestState round-tripped"

    @server.tool(structured_output=False)
    async def test_input_required_result_tampered_state(ctx: Context) -> Reply:
        """Sends requestState; the SDK seals it (AES-GCM), so a tampered echo is rejected before this runs."""
        answers = await _ask(ctx, {"confirm": confirm}, state="sealed-state")
        return answers if isinstance(answers, InputRequiredResult) else "state-ok"

    @server.tool(structured_output=False)
    async def test_input_required_result_multi_round(ctx: Context) -> Reply:
        """Three rounds: name, then favourite colour (with a new requestState), then done."""
        step2 = _elicit_request("Step 2: What is your favorite color?", _object({"color": _STRING}, "color"))
        if ctx.request_state != "round-2":  # round 1 or 2 on 2026-07-28; the whole flow on 2025-11-25
            step1 = _elicit_request("Step 1: What is your name?", _object({"name": _STRING}, "name"))
            first = await _ask(ctx, {"step1": step1}, state="round-1")
            if isinstance(first, InputRequiredResult):
                return first
            if _is_modern(ctx):
                return InputRequiredResult(input_requests={"step2": step2}, request_state="round-2")
        second = await _ask(ctx, {"step2": step2}, state="round-2")
        if isinstance(second, InputRequiredResult):
            return second
        return f"Favourite colour: {_content(second['step2']).get('color')}"


def _register_resources(server: MCPServer, subscriptions: set[str]) -> None:
    watched = ["Watched resource content, version 0"]

    @server.resource("test://static-text", name="static-text", description="Static text", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", name="static-binary", description="A 1x1 PNG", mime_type="image/png")
    def static_binary() -> bytes:
        return base64.b64decode(PNG_B64)

    @server.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
    def template_data(id: str) -> str:
        """Templated data; `{id}` is substituted into the content."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource(WATCHED_URI, name="watched-resource", description="Subscribable", mime_type="text/plain")
    def watched_resource() -> str:
        return watched[-1]

    @server.tool()
    async def test_update_watched_resource(ctx: Context) -> str:
        """Changes test://watched-resource and notifies its subscribers in both eras."""
        watched.append(f"Watched resource content, version {len(watched)}")
        await ctx.notify_resource_updated(WATCHED_URI)
        if not _is_modern(ctx) and WATCHED_URI in subscriptions:
            await ctx.session.send_resource_updated(WATCHED_URI)
        return watched[-1]


def _register_prompts(server: MCPServer) -> None:
    @server.prompt()
    def test_simple_prompt() -> list[Message]:
        """A simple prompt without arguments."""
        return [UserMessage("This is a simple prompt for testing.")]

    @server.prompt()
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
        """A prompt with two required arguments."""
        return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @server.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
        """A prompt embedding the resource at `resourceUri`."""
        resource = _embedded(resourceUri, "Embedded resource content for testing.")
        return [UserMessage(resource), UserMessage("Please process the embedded resource above.")]

    @server.prompt()
    def test_prompt_with_image() -> list[Message]:
        """A prompt containing an image."""
        return [UserMessage(_image()), UserMessage("Please analyze the image above.")]

    @server.prompt()
    async def test_input_required_result_prompt(ctx: Context) -> list[Message] | InputRequiredResult:
        """A prompt that first elicits the context to use (SEP-2322 on prompts/get)."""
        question = _elicit_request("What context should the prompt use?", _object({"context": _STRING}, "context"))
        answers = await _ask(ctx, {"user_context": question})
        if isinstance(answers, InputRequiredResult):
            return answers
        return [UserMessage(f"Use this context: {_content(answers['user_context']).get('context', '')}")]

    candidates = {"arg1": ["paris", "park", "party", "test-value"], "arg2": ["world", "wonder"], "id": ["123", "456"]}

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]  # SDK leaves `completion` unannotated
    async def complete(
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None,
    ) -> types.Completion:
        values = [v for v in candidates.get(argument.name, []) if v.startswith(argument.value)]
        return types.Completion(values=values, total=len(values), has_more=False)


def _register_handshake_era_methods(server: MCPServer, subscriptions: set[str]) -> None:
    """`logging/setLevel` and `resources/(un)subscribe`: 2025-11-25 only, and not offered by `MCPServer`."""

    async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        return types.EmptyResult()

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscriptions.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscriptions.discard(str(params.uri))
        return types.EmptyResult()

    # The SDK's per-version gate answers these with 404/-32601 on the 2026-07-28 wire.
    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]  # no public hook on MCPServer
    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)


def build_fixture_server(name: str = SERVER_NAME) -> MCPServer:
    """Build a fresh fixture server with every conformance fixture registered.

    Args:
        name: The `serverInfo.name` to report (a hub test can check it to see who answered).

    Returns:
        An `MCPServer`; serve it over streamable HTTP, stdio, or in-process with `Client(server)`.
    """
    server: MCPServer = MCPServer(
        name,
        version=SERVER_VERSION,
        instructions="MCP conformance fixtures.",
        tools=[_json_schema_2020_12_tool()],
        log_level="WARNING",
    )
    subscriptions: set[str] = set()
    _register_content_tools(server)
    _register_notifying_tools(server)
    _register_list_changing_tools(server)
    _register_client_input_tools(server)
    _register_input_required_tools(server)
    _register_stateful_input_required_tools(server)
    _register_resources(server, subscriptions)
    _register_prompts(server)
    _register_handshake_era_methods(server, subscriptions)
    return server


def transport_security(host: str) -> TransportSecuritySettings:
    """DNS-rebinding protection: accept only loopback Host/Origin values, plus a non-wildcard bound host.

    Args:
        host: The interface the server binds.

    Returns:
        Settings for `streamable_http_app(transport_security=...)`.
    """
    hosts = ["127.0.0.1", "localhost", "[::1]"]
    if host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
        hosts.append(f"[{host}]" if ":" in host else host)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in hosts],
        allowed_origins=[f"http://{h}:*" for h in hosts],
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the fixtures over streamable HTTP at `/mcp` (default) or over stdio.

    Args:
        argv: Command-line arguments; `sys.argv[1:]` when `None`.
    """
    parser = argparse.ArgumentParser(description="MCP conformance fixture server")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8931, help="HTTP port (default 8931)")
    parser.add_argument("--stdio", action="store_true", help="serve over stdio instead of HTTP")
    args = parser.parse_args(argv)
    server = build_fixture_server()
    if args.stdio:
        server.run("stdio")
        return
    serve = server.run_streamable_http_async(
        host=args.host,
        port=args.port,
        streamable_http_path="/mcp",
        event_store=InMemoryEventStore(),  # resumable SSE, so test_reconnection's result survives the disconnect
        retry_interval=500,  # the SSE `retry:` hint in milliseconds (SEP-1699)
        transport_security=transport_security(args.host),
    )
    asyncio.run(serve)


if __name__ == "__main__":
    main()
