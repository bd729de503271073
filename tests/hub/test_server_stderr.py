"""Downstream stderr as the hub keeps it: a vault secret a server prints becomes ``[redacted:NAME]`` in the log file
and in every message built from it, on both call paths (the raw fast path and the SDK session path); a chatty
server's log is rotated at its size limit and the crash report still quotes the right lines; and a secret a server
puts in a tool description, a resource, a prompt, a sampling or elicitation request or a log message reaches the
client (and the snapshot on disk) redacted."""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from hanzo_hub.config import HubSettings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.fastcall import RawToolCalls
from hanzo_hub.hub.server import build_server
from hanzo_hub.sandbox.vault import Vault
from tests.conftest import REPO, MakeSettings, inproc, text_of, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leaked_children")]

SECRET = "sk-live-9f8e7d6c5b4a3210"


def escape(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "tests.fixtures.escape"], "cwd": str(REPO), **extra}


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "session"])
async def test_a_secret_printed_to_stderr_never_reaches_the_log_or_the_client(
    make_settings: MakeSettings, fast: bool, caplog: pytest.LogCaptureFixture
) -> None:
    era = {"protocol": "legacy"} if fast else {}
    settings = make_settings(
        {"escape": escape(env={"API_TOKEN": "${vault:API_TOKEN}"}, **era), "alpha": inproc("alpha")},
        sandbox={"keyring_service": None},
    )
    Vault(settings.vault_dir, keyring_service=None).set("API_TOKEN", SECRET)

    async with Hub.open(settings) as hub:
        server = build_server(hub)
        raw = next(m for m in server.middleware if isinstance(m, RawToolCalls))
        # A stateless-era client declaring sampling takes the session's path (the era bridge might be needed).
        options: dict[str, Any] = {"mode": "legacy"} if fast else {"mode": "auto", "sampling_callback": _no_sampling}
        async with Client(server, **options) as client:
            await client.call_tool("escape__whoami", {})  # the first call starts the server (normal path)
            await client.call_tool("escape__whoami", {})
            assert (raw.fast_calls == 1) is fast  # so the next call takes the fast path, or the session's
            crashed = await client.call_tool("escape__leak_and_crash", {"name": "API_TOKEN"})
            token = await client.call_tool("escape__getenv", {"name": "API_TOKEN"})  # the server restarts

    message = text_of(crashed)
    assert crashed.is_error
    assert "fatal: bad credentials [redacted:API_TOKEN]" in message  # the stderr tail is in the error, redacted
    assert SECRET not in message
    assert text_of(token) == "[redacted:API_TOKEN]"  # the restarted server got the secret again
    log = _log(settings)
    assert SECRET.encode() not in log
    assert log.count(b"[redacted:API_TOKEN]") == 2  # the plain line and the one written in two pieces
    assert b"retrying with [redacted:API_TOKEN] failed" in log
    assert "exited unexpectedly; stderr: fatal: bad credentials [redacted:API_TOKEN]" in caplog.text
    assert SECRET not in caplog.text


async def _no_sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="no sampling here")


async def test_the_hubs_own_log_lines_are_redacted_while_it_runs(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings({"alpha": inproc("alpha")}, sandbox={"keyring_service": None})
    Vault(settings.vault_dir, keyring_service=None).set("API_TOKEN", SECRET)
    log = logging.getLogger("tests.redaction")
    async with Hub.open(settings):
        log.warning("a library echoed %s in an error", SECRET)
    log.warning("after the hub closed: %s", SECRET)  # the filter belongs to the running hub, not the process
    lines = [r.getMessage() for r in caplog.records if r.name == "tests.redaction"]
    assert lines == ["a library echoed [redacted:API_TOKEN] in an error", f"after the hub closed: {SECRET}"]


async def test_stderr_of_a_server_without_secrets_is_logged_as_written(make_settings: MakeSettings) -> None:
    settings = make_settings(
        {"escape": escape(env={"API_TOKEN": "not-a-vault-value"}), "alpha": inproc("alpha")},
        sandbox={"keyring_service": None},
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        crashed = await client.call_tool("escape__leak_and_crash", {"name": "API_TOKEN"})
    assert crashed.is_error
    assert b"fatal: bad credentials not-a-vault-value\nretrying with not-a-vault-value failed\n" in _log(settings)


def _log(settings: HubSettings) -> bytes:
    (path,) = settings.log_dir.glob("escape-*.log")
    return path.read_bytes()


async def test_a_chatty_servers_log_is_rotated_and_the_crash_report_still_quotes_it(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(
        {"escape": escape(), "alpha": inproc("alpha")},
        sandbox={"keyring_service": None},
        backends={"log_max_bytes": 4096, "log_backups": 1},
    )
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        for _ in range(5):
            assert text_of(await client.call_tool("escape__chatter", {"n": 100})) == "wrote 100"  # ~9 KB each
        crashed = await client.call_tool("escape__leak_and_crash", {"name": "NOT_SET"})
    assert crashed.is_error
    assert "fatal: bad credentials <unset>" in text_of(crashed)
    (log,) = settings.log_dir.glob("escape-*.log")
    files = sorted(settings.log_dir.glob("escape-*.log*"))
    assert [f.name for f in files] == [log.name, f"{log.name}.1"]
    assert [f.stat().st_size <= 4096 for f in files] == [True, True], [f.stat().st_size for f in files]
    assert b"chatter 00099" in log.read_bytes() + files[1].read_bytes()


async def test_what_a_server_sends_clients_is_redacted_listings_resources_prompts_sampling_elicitation_logs(
    make_settings: MakeSettings,
) -> None:
    leaky = {"command": sys.executable, "args": ["-m", "tests.fixtures.leaky"], "cwd": str(REPO), "protocol": "legacy"}
    settings = make_settings(
        {"leaky": {**leaky, "env": {"API_TOKEN": "${vault:API_TOKEN}"}}, "alpha": inproc("alpha")},
        sandbox={"keyring_service": None},
        llm={"sampling": "client"},
    )
    Vault(settings.vault_dir, keyring_service=None).set("API_TOKEN", SECRET)
    seen: list[str] = []

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen.append(params.model_dump_json())
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="ok"), model="m")

    async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.model_dump_json())
        return types.ElicitResult(action="decline")

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        seen.append(params.model_dump_json())

    callbacks = {"sampling_callback": sampling, "elicitation_callback": elicitation, "logging_callback": log}
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy", **callbacks) as client:
        with warnings.catch_warnings():  # logging/setLevel is deprecated in 2026-07-28, current in 2025-11-25
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("info")
        tools = {t.name: t for t in (await client.list_tools()).tools}
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        (uri,) = [u for u in resources if u.endswith("config")]
        read = await client.read_resource(uri)
        prompt = await client.get_prompt("leaky__connect")
        sampled = await client.call_tool("leaky__sample", {})
        confirmed = await client.call_tool("leaky__confirm", {})
        logged = await client.call_tool("leaky__log_it", {})
        await wait_until(lambda: len(seen) >= 3, timeout=5)  # the log notification may trail the tool's result

    assert [text_of(r) for r in (sampled, confirmed, logged)] == ["ok", "decline", "logged"]
    (snapshot,) = settings.snapshot_dir.glob("leaky-*.json")
    texts = [tools["leaky__log_it"].model_dump_json(), snapshot.read_text(encoding="utf-8")]
    texts += [read.model_dump_json(), prompt.model_dump_json(), *seen]
    assert len(seen) == 3  # the sampling request, the elicitation request, the log message
    for text in texts:
        assert SECRET not in text
        assert "[redacted:API_TOKEN]" in text
