"""OAuth 2.1 to remote servers: a real protected MCP server with its own authorization server in a subprocess
(``tests/fixtures/oauth_server.py``), the hub's login flow with a loopback callback, and the hub serving with the
stored tokens: refresh, rotation, revocation, denial, timeouts, and a server that needs a login the hub lacks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError

from hanzo_hub.backends.oauth import OAuthRecord, OAuthStore, record_name, union_scopes
from hanzo_hub.config import HubSettings
from hanzo_hub.errors import AuthorizationFailed
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.oauth_login import LoginResult, login
from hanzo_hub.hub.server import build_server
from hanzo_hub.sandbox.vault import Vault
from tests.conftest import REPO, MakeSettings, free_port, inproc, listening_process, text_of

pytestmark = pytest.mark.integration


@contextmanager
def oauth_server(ttl: int = 3600, mode: str = "ok") -> Iterator[str]:
    """The fixture server in its own process; yields its origin (``http://127.0.0.1:PORT``)."""
    port = free_port()
    with listening_process([sys.executable, "-m", "tests.fixtures.oauth_server", str(port), str(ttl), mode], port):
        yield f"http://127.0.0.1:{port}"


PREFIXED = {"prefix": True}
"""Tool names carry the server's prefix even with one server."""


def stats(origin: str) -> dict[str, int]:
    return dict(httpx2.get(f"{origin}/stats").json())


async def browser(url: str) -> None:
    """The user's browser: follows the authorization server's redirect to the hub's loopback callback."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as http:
        response = await http.get(url)
    assert response.status_code in (200, 400), response.text


async def do_login(settings: HubSettings, server: str = "remote", **kwargs: Any) -> LoginResult:
    kwargs.setdefault("open_url", browser)
    kwargs.setdefault("timeout", 20.0)
    return await login(settings, server, notify=lambda text: None, **kwargs)


async def listed_after_login(settings: HubSettings) -> None:
    """Log in to ``remote`` and serve one call, so the hub keeps a snapshot of its tools."""
    await do_login(settings)
    assert (await call(settings, "remote__whoami"))[0] is False


def stored(settings: HubSettings, server: str = "remote") -> OAuthRecord | None:
    return OAuthStore(settings.vault_dir, settings.sandbox.keyring_service).load_sync(server)


def remote(origin: str, kind: str = "http", **extra: Any) -> dict[str, Any]:
    path = "/mcp" if kind == "http" else "/sse"
    return {"type": kind, "url": f"{origin}{path}", **extra}


async def call(settings: HubSettings, tool: str, args: dict[str, Any] | None = None) -> tuple[bool, str]:
    async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
        await client.list_tools()  # waits for the first start (there is no snapshot yet)
        result = await client.call_tool(tool, args or {})
    return bool(result.is_error), text_of(result)


async def test_login_then_serving_uses_the_stored_tokens(make_settings: MakeSettings) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        result = await do_login(settings)
        assert result.tools == 6
        assert result.registered
        record = stored(settings)
        assert record is not None
        assert record.tokens is not None
        assert record.refreshable
        assert record.url == f"{origin}/mcp"
        assert record.client is not None
        # encrypted at rest, under the server's record name, never in plain text
        raw = (settings.vault_dir / "secrets.json").read_text()
        assert record_name("remote") in json.loads(raw)
        assert record.tokens.access_token not in raw

        failed, text = await call(settings, "remote__whoami")
        assert not failed
        assert text == f"alice via {record.client.client_id}"
        counts = stats(origin)
        assert (counts["registrations"], counts["code_exchanges"], counts["refreshes"]) == (1, 1, 0)
        # a server echoing the token back: it never reaches the client
        failed, text = await call(settings, "remote__echo_token")
        assert (failed, text) == (False, "[redacted:oauth.remote.access]")


async def test_an_expired_token_is_refreshed_and_the_rotated_tokens_are_kept(make_settings: MakeSettings) -> None:
    with oauth_server(ttl=2) as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        await do_login(settings)
        first = stored(settings)
        assert first is not None
        assert first.tokens is not None
        await anyio.sleep(2.5)  # the access token has expired
        failed, text = await call(settings, "remote__add", {"a": 2, "b": 3})
        assert (failed, text) == (False, "5")
        second = stored(settings)
        assert second is not None
        assert second.tokens is not None
        assert second.tokens.access_token != first.tokens.access_token
        assert second.tokens.refresh_token != first.tokens.refresh_token  # the server rotates refresh tokens
        assert stats(origin)["refreshes"] == 1
        # the old refresh token is spent at the server: a second refresh works only because the new one was saved
        await anyio.sleep(2.5)
        failed, text = await call(settings, "remote__add", {"a": 1, "b": 1})
        assert (failed, text) == (False, "2")
        assert stats(origin)["refreshes"] == 2
        assert stats(origin)["code_exchanges"] == 1
        # the token obtained while serving is redacted like the stored one
        await anyio.sleep(2.5)
        failed, text = await call(settings, "remote__echo_token")
        assert (failed, text) == (False, "[redacted:oauth.remote.access]")
        assert stats(origin)["refreshes"] == 3


async def test_a_server_asking_for_a_login_the_hub_lacks_fails_alone(make_settings: MakeSettings) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin), "local": inproc("alpha")})
        async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            fine = await client.call_tool("local__echo", {"text": "still here"})
        assert {name for name in names if not name.startswith("local__")} == {"remote__login"}  # the offer
        assert text_of(fine) == "still here"
        reason = hub.pool.get("remote").last_error or ""
        assert "HTTP 401" in reason
        assert "hanzo-hub auth login remote" in reason
        assert stats(origin)["registrations"] == 0  # serving never registers a client or starts a flow


async def test_a_revoked_grant_asks_for_a_new_login(make_settings: MakeSettings) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        await listed_after_login(settings)
        httpx2.post(f"{origin}/forget")  # the server drops every token it issued
        failed, text = await call(settings, "remote__whoami")
        assert failed
        assert "no longer accepts the stored login and refused its refresh (HTTP 400)" in text
        assert "hanzo-hub auth login remote" in text
        assert stats(origin)["authorizations"] == 1
        await do_login(settings)  # logging in again mends it, with the same client registration
        failed, text = await call(settings, "remote__whoami")
        assert not failed
        assert text.startswith("alice via ")
        assert stats(origin)["registrations"] == 1
        assert stats(origin)["authorizations"] == 2


async def test_a_rejected_access_token_is_refreshed_before_giving_up(make_settings: MakeSettings) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        await listed_after_login(settings)
        httpx2.post(f"{origin}/forget?keep_refresh=1")  # the access token dies early; the grant lives on
        failed, text = await call(settings, "remote__whoami")
        assert not failed
        assert text.startswith("alice via ")
        counts = stats(origin)
        assert (counts["refreshes"], counts["authorizations"], counts["registrations"]) == (1, 1, 1)
        record = stored(settings)
        assert record is not None
        assert record.refreshable  # the rotated refresh token was kept for the next time


async def test_a_denied_login_says_why_and_stores_no_tokens(make_settings: MakeSettings) -> None:
    with oauth_server(mode="deny") as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        with pytest.raises(AuthorizationFailed, match="access_denied: the user said no"):
            await do_login(settings)
        record = stored(settings)
        assert record is None or record.tokens is None


async def test_a_login_nobody_completes_times_out(make_settings: MakeSettings) -> None:
    async def nobody(url: str) -> None:
        return None

    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        with anyio.fail_after(20):
            with pytest.raises(AuthorizationFailed, match="no authorization arrived within 1 s"):
                await do_login(settings, open_url=nobody, timeout=1.0)


async def test_oauth_over_legacy_sse(make_settings: MakeSettings) -> None:
    with oauth_server(mode="sse") as origin:
        settings = make_settings({"old": remote(origin, "sse")}, exposure=PREFIXED)
        result = await do_login(settings, "old")
        assert result.tools == 6
        assert result.record is not None
        failed, text = await call(settings, "old__whoami")
        assert not failed
        assert text.startswith("alice via ")


async def test_a_login_lost_over_legacy_sse_fails_the_call_at_once_with_the_reason(make_settings: MakeSettings) -> None:
    """The SDK's legacy SSE client swallows an error raised while posting (its writer stops): the hub ends the
    connection itself, so the call fails at once, not after its timeout, and says which login to make."""
    with oauth_server(mode="sse") as origin:
        settings = make_settings({"old": remote(origin, "sse")}, exposure=PREFIXED)
        await do_login(settings, "old")
        async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
            assert not (await client.call_tool("old__whoami", {})).is_error
            httpx2.post(f"{origin}/forget")  # the grant is gone, refresh token too
            with anyio.fail_after(5):  # the call timeout is 10 s
                lost = await client.call_tool("old__whoami", {})
                again = await client.call_tool("old__add", {"a": 1, "b": 2})
            status = hub.pool.get("old").status()
        for result in (lost, again):
            assert result.is_error
            assert "the server no longer accepts the stored login" in text_of(result)
            assert "hanzo-hub auth login old" in text_of(result)
        assert status["needs_login"]


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_a_post_the_server_refuses_fails_its_call_at_once_and_the_next_call_works(
    make_settings: MakeSettings, kind: str
) -> None:
    """HTTP 500 to one request, and a step-up the login cannot serve: each fails its request alone, with the reason,
    and the connection goes on, over streamable HTTP and over legacy SSE alike (whose SDK client would stop posting:
    ``sse_posts`` answers the request and lets it go on)."""
    mode = "sse" if kind == "sse" else "ok"
    with oauth_server(mode=mode) as origin:
        settings = make_settings({"remote": remote(origin, kind)}, exposure=PREFIXED)
        await listed_after_login(settings)
        async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
            with anyio.fail_after(5):  # the call timeout is 10 s
                try:
                    exploded = text_of(await client.call_tool("remote__explode", {}))
                except MCPError as exc:  # streamable HTTP: the request's JSON-RPC error, relayed as one
                    exploded = exc.error.message
                after_500 = await client.call_tool("remote__add", {"a": 1, "b": 2})
                reset = await client.call_tool("remote__admin_reset", {})
                after_403 = await client.call_tool("remote__add", {"a": 2, "b": 2})
            starts = hub.pool.get("remote").status()["starts"]
        assert "server 'remote' answered HTTP 500: the server broke" in exploded
        assert (after_500.is_error, text_of(after_500)) == (False, "3")
        assert reset.is_error
        assert "the server asks for more scopes (mcp admin)" in text_of(reset)
        assert (after_403.is_error, text_of(after_403)) == (False, "4")
        assert starts == 1


async def test_a_login_for_another_url_is_never_sent(make_settings: MakeSettings) -> None:
    with oauth_server() as first, oauth_server() as second:
        settings = make_settings({"remote": remote(first)})
        await do_login(settings)
        moved = make_settings({"remote": remote(second), "local": inproc("alpha")})  # same name and home
        async with Hub.open(moved) as hub, Client(build_server(hub)) as client:
            await client.list_tools()
        assert "HTTP 401" in (hub.pool.get("remote").last_error or "")
        assert stats(second)["registrations"] == 0
        assert stats(first)["code_exchanges"] == 1


def _cli(settings: HubSettings, *args: str) -> list[str]:
    assert settings.config_file is not None
    base = [sys.executable, "-m", "hanzo_hub", "auth", *args]
    return [*base, "--config", str(settings.config_file), "--home", str(settings.home)]


def test_the_auth_commands_log_in_report_and_log_out(make_settings: MakeSettings, tmp_path: Path) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin), "local": inproc("alpha")})
        proc = subprocess.Popen(
            _cli(settings, "login", "remote", "--no-browser", "--timeout", "30"),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        url = ""
        for line in proc.stderr:
            if line.strip().startswith(f"{origin}/authorize?"):
                url = line.strip()
                break
        assert url, "the command printed no authorization URL"
        anyio.run(browser, url)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert out.startswith("logged in to 'remote': 6 tools; the token expires in 60 min, refreshed automatically")

        status = subprocess.run(
            _cli(settings, "status", "--json"), cwd=REPO, capture_output=True, text=True, check=True
        )
        rows = {row["server"]: row for row in json.loads(status.stdout)["servers"]}
        assert set(rows) == {"remote"}  # only remote servers
        assert rows["remote"]["state"] == "logged-in"
        assert rows["remote"]["refreshable"]
        assert rows["remote"]["scope"] == "mcp"

        assert stats(origin)["live_tokens"] == 1
        assert stats(origin)["live_refresh_tokens"] == 1
        gone = subprocess.run(_cli(settings, "logout", "remote"), cwd=REPO, capture_output=True, text=True, check=True)
        assert gone.stdout.startswith(f"revoked the refresh token and access token at {origin}/revoke\n")
        assert "forgot the login to 'remote'" in gone.stdout
        assert stats(origin)["live_tokens"] == 0  # the grant ended at the server, not only in the vault
        assert stats(origin)["live_refresh_tokens"] == 0
        status = subprocess.run(_cli(settings, "status"), cwd=REPO, capture_output=True, text=True, check=True)
        assert status.stdout.startswith("none       remote")
        wrong = subprocess.run(_cli(settings, "login", "local"), cwd=REPO, capture_output=True, text=True)
        assert wrong.returncode == 2
        assert "OAuth applies to remote (http, sse) servers" in wrong.stderr
        assert Vault(settings.vault_dir, keyring_service=None).list() == []


def test_the_doctor_reports_oauth_logins(make_settings: MakeSettings) -> None:
    from tests.test_cli_doctor import doctor

    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin, oauth=True), "open": remote(origin)})
        code, checks, _ = doctor(settings, "--probe", "--timeout", "10")
        assert code == 1
        assert checks["server:remote"]["status"] == "fail"
        assert checks["server:remote"]["detail"].endswith("no OAuth login")
        assert checks["server:remote"]["hint"] == "hanzo-hub auth login remote"
        # without `oauth` in its config only the probe can tell that a server asks for a login
        assert checks["server:open"]["status"] == "ok"
        assert checks["probe:open"]["status"] == "fail"
        assert "HTTP 401" in checks["probe:open"]["detail"]
        assert checks["probe:open"]["hint"] == "hanzo-hub auth login open"

        anyio.run(lambda: do_login(settings))
        code, checks, _ = doctor(settings, "--probe", "--timeout", "10")
        assert checks["server:remote"]["status"] == "ok"
        detail = checks["server:remote"]["detail"]
        assert "OAuth login (the token expires in 60 min, refreshed automatically, scope mcp)" in detail
        assert checks["probe:remote"]["status"] == "ok"
        assert checks["probe:remote"]["detail"].startswith("6 tools")


class UrlClient:
    """A client whose user opens the URL an elicitation shows (the hub's authorization page) and approves it."""

    def __init__(self, action: str = "accept") -> None:
        self.action = action
        self.asked: list[types.ElicitRequestURLParams] = []
        self.completed: list[str] = []

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        self.asked.append(params)
        if self.action == "accept":
            await browser(params.url)
        return types.ElicitResult(action=self.action)  # type: ignore[arg-type]

    async def on_message(self, message: object) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)


def browsing_client(hub: Hub, mode: str, user: UrlClient) -> Client:
    """A client of ``mode`` (protocol era) whose ``user`` opens the URLs it is shown."""
    return Client(build_server(hub), mode=mode, elicitation_callback=user.elicitation, message_handler=user.on_message)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_login_the_hub_lost_is_given_again_through_the_client(make_settings: MakeSettings, mode: str) -> None:
    """2025-11-25: the URL goes out during the call, which is retried. 2026-07-28: the call answers an
    InputRequiredResult with the URL; the client's retry waits for the login, then makes the call."""
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        await listed_after_login(settings)
        httpx2.post(f"{origin}/forget")  # the grant is gone, refresh token too
        user = UrlClient()
        async with (
            Hub.open(settings) as hub,
            browsing_client(hub, mode, user) as client,
        ):
            assert (client.protocol_version == "2026-07-28") == (mode == "auto")
            await client.list_tools()
            result = await client.call_tool("remote__whoami", {})
            again = await client.call_tool("remote__add", {"a": 2, "b": 3})
        assert not result.is_error, text_of(result)
        assert text_of(result).startswith("alice via ")
        assert not again.is_error, text_of(again)
        assert len(user.asked) == 1
        assert user.asked[0].url.startswith(f"{origin}/authorize?")
        assert "authorize it with the server 'remote'" in user.asked[0].message
        assert user.completed == ([user.asked[0].elicitation_id] if mode == "legacy" else [])
        assert stats(origin)["authorizations"] == 2


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tool_that_needs_more_scopes_gets_them_through_a_new_login(
    make_settings: MakeSettings, mode: str
) -> None:
    """A step-up: the server answers one tool's call 403 insufficient_scope. The hub keeps the scopes asked for, and
    the user logs in again through the client for the union; the client registered for fewer scopes is replaced."""
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        await listed_after_login(settings)
        first = stored(settings)
        assert first is not None
        assert first.tokens is not None
        assert first.client is not None
        assert first.tokens.scope == "mcp"
        user = UrlClient()
        async with (
            Hub.open(settings) as hub,
            browsing_client(hub, mode, user) as client,
        ):
            await client.list_tools()
            before = await client.call_tool("remote__whoami", {})
            reset = await client.call_tool("remote__admin_reset", {})
            after = await client.call_tool("remote__add", {"a": 2, "b": 3})
        assert not before.is_error, text_of(before)
        assert not after.is_error, text_of(after)
        assert not reset.is_error, text_of(reset)
        assert text_of(reset) == "reset by alice with scopes mcp admin"
        assert len(user.asked) == 1
        assert "scope=mcp+admin" in user.asked[0].url
        record = stored(settings)
        assert record is not None
        assert record.tokens is not None
        assert record.client is not None
        assert record.tokens.scope == "mcp admin"
        assert record.scope_wanted == "mcp admin"
        # the server registered the first client for "mcp" only: asking it for "admin" would be refused
        assert record.client.client_id != first.client.client_id
        assert stats(origin)["registrations"] == 2


async def test_a_step_up_without_a_client_names_the_scopes_and_the_login_command(make_settings: MakeSettings) -> None:
    """On streamable HTTP the refused call alone fails: the connection goes on serving what the login grants, and a
    login made meanwhile (`hanzo-hub auth login`, here in the same process) serves the call without a restart."""
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        await listed_after_login(settings)
        async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
            await client.list_tools()
            reset = await client.call_tool("remote__admin_reset", {})
            whoami = await client.call_tool("remote__whoami", {})
            status = hub.pool.get("remote").status()
            record = stored(settings)
            login = await do_login(settings)  # asks for the union
            again = await client.call_tool("remote__admin_reset", {})
            after = hub.pool.get("remote").status()
        assert reset.is_error
        assert "the server asks for more scopes (mcp admin)" in text_of(reset)
        assert "hanzo-hub auth login remote" in text_of(reset)
        assert not whoami.is_error, text_of(whoami)
        assert status["needs_login"]
        assert record is not None
        assert record.scope_wanted == "mcp admin"
        assert login.record is not None
        assert login.record.tokens is not None
        assert login.record.tokens.scope == "mcp admin"
        assert (again.is_error, text_of(again)) == (False, "reset by alice with scopes mcp admin")
        assert (after["starts"], after["failures"]) == (status["starts"], 0)


async def test_a_step_up_fails_only_its_own_call(make_settings: MakeSettings) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        await listed_after_login(settings)
        results: dict[str, types.CallToolResult] = {}
        async with Hub.open(settings) as hub, Client(build_server(hub)) as client:
            await client.call_tool("remote__whoami", {})

            async def waiting() -> None:
                results["wait"] = await client.call_tool("remote__wait", {"seconds": 1.0})

            async with anyio.create_task_group() as tg:
                tg.start_soon(waiting)
                await anyio.sleep(0.3)
                results["reset"] = await client.call_tool("remote__admin_reset", {})
            status = hub.pool.get("remote").status()
        assert "the server asks for more scopes (mcp admin)" in text_of(results["reset"])
        assert (results["wait"].is_error, text_of(results["wait"])) == (False, "waited")
        assert (status["starts"], status["state"]) == (1, "running")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_user_who_declines_gets_the_error_and_why(make_settings: MakeSettings, mode: str) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)}, exposure=PREFIXED)
        await listed_after_login(settings)
        httpx2.post(f"{origin}/forget")
        user = UrlClient("decline")
        async with (
            Hub.open(settings) as hub,
            Client(build_server(hub), mode=mode, elicitation_callback=user.elicitation) as client,
        ):
            await client.list_tools()
            result = await client.call_tool("remote__whoami", {})
        assert result.is_error
        assert "hanzo-hub auth login remote" in text_of(result)
        assert "the login through the client failed: the user did not open the authorization page (decline)" in (
            text_of(result)
        )
        assert stats(origin)["authorizations"] == 1


async def listed(client: Client, name: str) -> set[str]:
    """The listed tool names once ``name`` is among them (bounded)."""
    with anyio.fail_after(15):
        while True:
            names = {tool.name for tool in (await client.list_tools()).tools}
            if name in names:
                return names
            await anyio.sleep(0.05)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_server_never_logged_in_offers_a_login_tool(make_settings: MakeSettings, mode: str) -> None:
    """2025-11-25: the URL goes out as elicitation/create on the session, and elicitation/complete follows.
    2026-07-28: the call answers InputRequiredResult with the URL elicitation; the retry waits for the login."""
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin), "local": inproc("alpha")})
        user = UrlClient()
        async with (
            Hub.open(settings) as hub,
            browsing_client(hub, mode, user) as client,
        ):
            assert (client.protocol_version == "2026-07-28") == (mode == "auto")
            before = await listed(client, "remote__login")
            result = await client.call_tool("remote__login", {})
            after = await listed(client, "remote__whoami")
            whoami = await client.call_tool("remote__whoami", {})
            echoed = await client.call_tool("remote__echo_token", {})  # the vault was empty when the hub started
        assert {n for n in before if n.startswith("remote__")} == {"remote__login"}
        assert not result.is_error, text_of(result)
        assert text_of(result) == "Logged in to 'remote'; its 6 tools are listed now."
        assert {n for n in after if n.startswith("remote__")} == {
            "remote__whoami",
            "remote__add",
            "remote__echo_token",
            "remote__admin_reset",
            "remote__wait",
            "remote__explode",
        }
        assert text_of(whoami).startswith("alice via ")
        assert text_of(echoed) == "[redacted:oauth.remote.access]"
        assert len(user.asked) == 1
        assert user.asked[0].url.startswith(f"{origin}/authorize?")
        # elicitation/complete is a handshake-era notice; the stateless era's retry is its own completion
        assert user.completed == ([user.asked[0].elicitation_id] if mode == "legacy" else [])
        record = stored(settings)
        assert record is not None
        assert record.tokens is not None  # kept for the next start, as `hanzo-hub auth login` would


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_without_url_elicitation_is_told_to_use_the_command(
    make_settings: MakeSettings, mode: str
) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin), "local": inproc("alpha")})
        async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode) as client:
            await listed(client, "remote__login")
            result = await client.call_tool("remote__login", {})
        assert result.is_error
        assert "run `hanzo-hub auth login remote` in a terminal" in text_of(result)
        assert stats(origin)["registrations"] == 0


def _logout(settings: HubSettings, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cli(settings, "logout", "remote", *extra), cwd=REPO, capture_output=True, text=True)


async def test_logout_revokes_only_when_it_can_and_always_forgets(make_settings: MakeSettings) -> None:
    """--no-revoke leaves the grant at the server; a server without a revocation endpoint, or one that is down, is
    said so (exit 0 and 1), and the login is forgotten every time."""
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)})
        await do_login(settings)
        kept = _logout(settings, "--no-revoke")
        assert kept.returncode == 0, kept.stderr
        assert stats(origin)["live_tokens"] == 1
        assert stored(settings) is None
    with oauth_server(mode="norevoke") as origin:
        settings = make_settings({"remote": remote(origin)})
        await do_login(settings)
        unsupported = _logout(settings)
        assert unsupported.returncode == 0, unsupported.stderr
        assert "not revoked: the authorization server offers no revocation endpoint" in unsupported.stderr
        assert "the grant stays valid at the server" in unsupported.stdout
        assert stored(settings) is None
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin)})
        await do_login(settings)
    down = _logout(settings, "--timeout", "3")  # the server (and its authorization server) has stopped
    assert down.returncode == 1
    assert "not revoked: the authorization server could not be reached" in down.stderr
    assert stored(settings) is None


async def test_a_client_registered_by_hand_logs_in_refreshes_and_revokes_with_its_secret(
    make_settings: MakeSettings,
) -> None:
    """The config's ``oauth.client_id`` / ``client_secret`` (from the vault) / ``redirect_port``: no dynamic
    registration, the secret authenticates the code exchange, the refresh and the revocation."""
    from tests.fixtures.oauth_server import PRESET_ID, PRESET_SECRET

    redirect = free_port()
    with oauth_server(ttl=1, mode=f"preset:{redirect}") as origin:
        oauth = {"client_id": PRESET_ID, "client_secret": "${vault:PRESET_SECRET}", "redirect_port": redirect}
        settings = make_settings({"remote": remote(origin, oauth=oauth)})
        Vault(settings.vault_dir, keyring_service=None).set("PRESET_SECRET", PRESET_SECRET)
        result = await do_login(settings)
        assert not result.registered
        await anyio.sleep(1.5)  # the one-second access token has expired: serving refreshes it, as the preset client
        error, text = await call(settings, "whoami")
        assert not error, text
        assert text == f"alice via {PRESET_ID}"
        seen = stats(origin)
        assert seen["registrations"] == 0
        assert seen["refreshes"] >= 1
        gone = _logout(settings)
        assert gone.returncode == 0, gone.stderr
        assert gone.stdout.startswith("revoked the refresh token and access token at ")
        assert stats(origin)["live_refresh_tokens"] == 0


async def test_a_stateless_client_that_declines_the_login_gets_why(make_settings: MakeSettings) -> None:
    with oauth_server() as origin:
        settings = make_settings({"remote": remote(origin), "local": inproc("alpha")})
        user = UrlClient("decline")
        async with (
            Hub.open(settings) as hub,
            Client(build_server(hub), mode="auto", elicitation_callback=user.elicitation) as client,
        ):
            await listed(client, "remote__login")
            result = await client.call_tool("remote__login", {})
            still = {tool.name for tool in (await client.list_tools()).tools}
        assert result.is_error
        assert "the user did not open the authorization page (decline)" in text_of(result)
        assert "remote__login" in still  # nothing changed: the login tool is still there to try again
        record = stored(settings)
        assert record is None or record.tokens is None


def test_the_scopes_a_server_asked_for_are_kept_with_the_login() -> None:
    # A step-up (403 insufficient_scope) keeps what the server wanted, so the next login asks for all of it; a record
    # written before the field existed reads as wanting nothing more.
    record = OAuthRecord(url="https://x.example/mcp", scope_wanted="mcp:basic mcp:write")
    assert OAuthRecord.from_json(record.to_json()).scope_wanted == "mcp:basic mcp:write"
    legacy = json.loads(record.to_json())
    del legacy["scope_wanted"]
    assert OAuthRecord.from_json(json.dumps(legacy)).scope_wanted is None
    assert union_scopes("mcp:basic", None, "mcp:write mcp:basic", "") == "mcp:basic mcp:write"
