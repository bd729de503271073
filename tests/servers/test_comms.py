"""The ``comms`` server over MCP against real services on loopback: aiosmtpd, Dovecot, mosquitto, ngircd, HTTP."""

from __future__ import annotations

import base64
import imaplib
import json
import shutil
import socket
import time
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import anyio
import pytest

from servers.comms.server import mcp
from tests.servers import comms_services as svc
from tests.servers.conftest import Client, err, ok, text

pytestmark = pytest.mark.anyio
TOKEN = "T000/B000/very-secret-token"


def _need(binary: str) -> None:
    if shutil.which(binary) is None:
        pytest.skip(f"{binary} is not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("comms")


@pytest.fixture(scope="module")
def env() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMMS_TIMEOUT_SECONDS", "10")
        yield mp


@pytest.fixture(scope="module")
def cert(env: pytest.MonkeyPatch, tmp: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 that the server trusts through COMMS_TLS_CA_FILE."""
    cert, key = svc.self_signed(tmp)
    env.setenv("COMMS_TLS_CA_FILE", str(cert))
    return cert, key


@pytest.fixture(scope="module")
def smtp(env: pytest.MonkeyPatch, cert: tuple[Path, Path]) -> Iterator[svc.Mailbox]:
    with svc.smtp(*cert) as (port, mailbox):
        for name, value in {
            "COMMS_SMTP_HOST": "127.0.0.1",
            "COMMS_SMTP_PORT": str(port),
            "COMMS_SMTP_SECURITY": "starttls",
            "COMMS_SMTP_USERNAME": svc.SMTP_USER,
            "COMMS_SMTP_PASSWORD": svc.SMTP_PASSWORD,
            "COMMS_SMTP_FROM": "bot@example.org",
        }.items():
            env.setenv(name, value)
        yield mailbox


@pytest.fixture(scope="module")
def imap_ports(env: pytest.MonkeyPatch, cert: tuple[Path, Path]) -> Iterator[tuple[int, int]]:
    _need("dovecot")
    with svc.dovecot(*cert) as ports:
        yield ports


@pytest.fixture(scope="module")
def imap(env: pytest.MonkeyPatch, imap_ports: tuple[int, int]) -> int:
    port = imap_ports[0]
    env.setenv("COMMS_IMAP_HOST", "127.0.0.1")
    env.setenv("COMMS_IMAP_PORT", str(port))
    env.setenv("COMMS_IMAP_SECURITY", "none")
    env.setenv("COMMS_IMAP_USERNAME", svc.IMAP_USER)
    env.setenv("COMMS_IMAP_PASSWORD", svc.IMAP_PASSWORD)
    return port


@pytest.fixture(scope="module")
def mqtt(env: pytest.MonkeyPatch, tmp: Path) -> Iterator[int]:
    _need("mosquitto")
    with svc.mosquitto(tmp) as port:
        env.setenv("COMMS_MQTT_HOST", "127.0.0.1")
        env.setenv("COMMS_MQTT_PORT", str(port))
        yield port


@pytest.fixture(scope="module")
def irc(env: pytest.MonkeyPatch, tmp: Path) -> Iterator[int]:
    _need("ngircd")
    with svc.ngircd(tmp) as port:
        env.setenv("COMMS_IRC_HOST", "127.0.0.1")
        env.setenv("COMMS_IRC_PORT", str(port))
        env.setenv("COMMS_IRC_NICK", "hubbot")
        yield port


@pytest.fixture(scope="module")
def hooks(env: pytest.MonkeyPatch) -> Iterator[svc.Receiver]:
    with svc.receiver() as got:
        env.setenv("COMMS_SLACK_WEBHOOK_URL", f"{got.url}/slack/{TOKEN}")
        env.setenv("COMMS_DISCORD_WEBHOOK_URL", f"{got.url}/discord/1/{TOKEN}")
        env.setenv(
            "COMMS_WEBHOOKS",
            json.dumps({"ci": f"{got.url}/hook/ci?token={TOKEN}", "broken": f"{got.url}/fail/{TOKEN}"}),
        )
        host = got.url.removeprefix("http://")
        env.setenv("COMMS_NOTIFY_URLS", json.dumps({"ops": f"json://{host}/apprise/{TOKEN}"}))
        yield got


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp) as c:
        yield c


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    return ok(await client.call_tool(tool, args))


async def fail(client: Client, tool: str, **args: Any) -> str:
    return err(await client.call_tool(tool, args))


def imap_append(port: int, raw: bytes, flags: str = "") -> None:
    """Deliver a message straight into the test user's INBOX (test setup, not the tool under test)."""
    conn = imaplib.IMAP4("127.0.0.1", port, timeout=10)
    try:
        conn.login(svc.IMAP_USER, svc.IMAP_PASSWORD)
        assert conn.append("INBOX", flags or None, None, raw)[0] == "OK"
    finally:
        conn.logout()


def note(sender: str, subject: str, body: str) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = sender, "ana@example.org", subject
    msg.set_content(body)
    return bytes(msg)


async def test_server_lists_at_least_15_annotated_tools(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) >= 15
    for tool in tools:
        assert tool.annotations is not None, tool.name
        assert tool.annotations.read_only_hint is not None, tool.name
        assert len(tool.description or "") > 40, tool.name


async def test_channels_show_targets_but_never_secrets(
    client: Client, smtp: svc.Mailbox, hooks: svc.Receiver, env: pytest.MonkeyPatch
) -> None:
    result = await client.call_tool("comms_channels", {})
    table = ok(result)
    channels = dict(map(tuple, table["rows"]))
    assert channels["email_send"].endswith("(starttls)")
    assert channels["slack_webhook_post"] == hooks.url
    assert channels["webhook_post:ci"] == hooks.url
    assert channels["notify:ops"] == "json://"
    assert TOKEN not in text(result)
    assert svc.SMTP_PASSWORD not in text(result)


async def test_email_send_html_attachments_over_starttls_then_read_back_over_imap(
    client: Client, smtp: svc.Mailbox, imap: int
) -> None:
    pdf = b"%PDF-1.4 fake \xff\x00 bytes"
    sent = await call(
        client,
        "email_send",
        to=["ana@example.org"],
        cc=["bo@example.org"],
        bcc=["audit@example.org"],
        subject="Quarterly report ✓",
        text="See the attached figures.",
        html="<p>See the <b>attached</b> figures.</p>",
        reply_to="team@example.org",
        attachments=[
            {"filename": "q1.csv", "content": "a,b\n1,2\n"},
            {"filename": "q1.pdf", "content": base64.b64encode(pdf).decode(), "encoding": "base64"},
        ],
    )
    assert sent["accepted"] == ["ana@example.org", "bo@example.org", "audit@example.org"]
    sender, recipients, message, over_tls = smtp.received[-1]
    assert over_tls
    assert sender == "bot@example.org"
    assert recipients == ["ana@example.org", "bo@example.org", "audit@example.org"]
    assert "audit@example.org" not in str(message)
    assert message["Message-ID"] == sent["messageId"]

    imap_append(imap, message.as_bytes())
    listed = await call(client, "email_list", subject_contains="Quarterly")
    assert listed["rowCount"] == 1
    uid = listed["rows"][0][0]
    opened = await call(client, "email_read", uid=uid, include_html=True, include_attachments=True)
    assert opened["subject"] == "Quarterly report ✓"
    assert opened["text"].strip() == "See the attached figures."
    assert "<b>attached</b>" in opened["html"]
    files = {a["filename"]: a for a in opened["attachments"]}
    assert base64.b64decode(files["q1.csv"]["contentBase64"]) == b"a,b\n1,2\n"
    assert base64.b64decode(files["q1.pdf"]["contentBase64"]) == pdf
    assert files["q1.pdf"]["contentType"] == "application/pdf"


async def test_email_send_html_only_gets_a_text_part(client: Client, smtp: svc.Mailbox) -> None:
    html = "<html><head><style>p{}</style></head><body><h1>Hi</h1><p>Click <a href='https://x.test'>here</a></p></body></html>"
    await call(client, "email_send", to=["ana@example.org"], subject="html only", html=html)
    message = smtp.received[-1][2]
    plain = next(p for p in message.walk() if p.get_content_type() == "text/plain").get_payload(decode=True)
    assert isinstance(plain, bytes)
    assert plain.decode().split() == ["Hi", "Click", "here", "(https://x.test)"]


async def test_email_send_errors(client: Client, smtp: svc.Mailbox, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "give a body" in await fail(client, "email_send", to=["a@example.org"], subject="x")
    assert "to" in await fail(client, "email_send", to=["not-an-address"], subject="x", text="y")
    assert "base64" in await fail(
        client,
        "email_send",
        to=["a@example.org"],
        subject="x",
        text="y",
        attachments=[{"filename": "f.bin", "content": "%%%", "encoding": "base64"}],
    )
    monkeypatch.setenv("COMMS_SMTP_PASSWORD", "wrong")
    assert "login refused" in await fail(client, "email_send", to=["a@example.org"], subject="x", text="y")
    monkeypatch.delenv("COMMS_SMTP_HOST")
    assert "COMMS_SMTP_HOST" in await fail(client, "email_send", to=["a@example.org"], subject="x", text="y")


async def test_email_send_over_implicit_tls(
    client: Client, cert: tuple[Path, Path], smtp: svc.Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    with svc.smtp(*cert, implicit_tls=True) as (port, mailbox):
        monkeypatch.setenv("COMMS_SMTP_PORT", str(port))
        monkeypatch.setenv("COMMS_SMTP_SECURITY", "ssl")
        monkeypatch.delenv("COMMS_SMTP_USERNAME")  # this server takes mail without AUTH
        sent = await call(client, "email_send", to=["ana@example.org"], subject="tls", text="over TLS")
        assert sent["accepted"] == ["ana@example.org"]
        assert [(m["Subject"], tls) for _, _, m, tls in mailbox.received] == [("tls", True)]
        monkeypatch.delenv("COMMS_TLS_CA_FILE")  # the self-signed certificate is no longer trusted
        assert "CERTIFICATE_VERIFY_FAILED" in await fail(
            client, "email_send", to=["a@example.org"], subject="x", text="y"
        )


async def test_imap_over_starttls_and_implicit_tls(
    client: Client, imap: int, imap_ports: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMMS_IMAP_SECURITY", "starttls")
    assert "INBOX" in {r[0] for r in (await call(client, "email_list_mailboxes"))["rows"]}
    monkeypatch.setenv("COMMS_IMAP_SECURITY", "ssl")
    monkeypatch.setenv("COMMS_IMAP_PORT", str(imap_ports[1]))
    assert "INBOX" in {r[0] for r in (await call(client, "email_list_mailboxes"))["rows"]}
    monkeypatch.delenv("COMMS_TLS_CA_FILE")
    assert "CERTIFICATE_VERIFY_FAILED" in await fail(client, "email_list_mailboxes")


async def unseen_in(client: Client, mailbox: str) -> int:
    rows = (await call(client, "email_list_mailboxes"))["rows"]
    return int(next(r[2] for r in rows if r[0] == mailbox))


async def test_imap_list_flags_move_and_expunge(client: Client, imap: int) -> None:
    imap_append(imap, note("Carol <carol@example.org>", "lunch?", "Pizza at noon"))
    imap_append(imap, note("dave@example.org", "invoice 42", "Please pay"), flags="\\Seen")
    imap_append(imap, note("carol@example.org", "re: lunch?", "Sushi instead"))

    boxes = {r[0]: r for r in (await call(client, "email_list_mailboxes"))["rows"]}
    assert {"INBOX", "Archive", "Trash"} <= set(boxes)
    assert boxes["Trash"][3] == "Trash"
    unseen_before = boxes["INBOX"][2]

    carol = await call(client, "email_list", from_contains="carol")
    assert [r[3] for r in carol["rows"]] == ["re: lunch?", "lunch?"]
    assert carol["rows"][1][2] == "Carol <carol@example.org>"
    unseen = await call(client, "email_list", unseen_only=True, limit=500)
    assert "invoice 42" not in [r[3] for r in unseen["rows"]]
    assert (await call(client, "email_list", text_contains="Sushi"))["rowCount"] == 1
    assert (await call(client, "email_list", since="2000-01-01", limit=1))["total"] >= 3

    lunch, re_lunch = carol["rows"][1][0], carol["rows"][0][0]
    body = await call(client, "email_read", uid=lunch)
    assert body["text"].strip() == "Pizza at noon"
    assert "seen" not in body["flags"]
    await call(client, "email_read", uid=lunch, mark_seen=True)
    assert await unseen_in(client, "INBOX") == unseen_before - 1
    flags = await call(client, "email_set_flags", uids=[lunch, re_lunch], add=["flagged"], remove=["seen"])
    assert [sorted(f) for _, f in flags["rows"]] == [["flagged"], ["flagged"]]
    assert await unseen_in(client, "INBOX") == unseen_before
    assert (await call(client, "email_list", flagged_only=True))["rowCount"] == 2

    moved = await call(client, "email_move", uids=[lunch, 99999], destination="Archive")
    assert moved["moved"] == [lunch]
    assert moved["missing"] == [99999]
    archived = await call(client, "email_list", mailbox="Archive")
    assert [r[3] for r in archived["rows"]] == ["lunch?"]

    gone = await call(client, "email_set_flags", uids=[re_lunch], add=["deleted"], expunge=True)
    assert gone["expunged"] == [re_lunch]
    assert (await call(client, "email_list", text_contains="Sushi"))["rowCount"] == 0


async def test_imap_errors(client: Client, imap: int, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "no message with uid" in await fail(client, "email_read", uid=987654)
    assert "IMAP" in await fail(client, "email_list", mailbox="NoSuchFolder")
    assert "no mailbox" in await fail(client, "email_move", uids=[1], destination="Nowhere")
    assert "nothing to do" in await fail(client, "email_set_flags", uids=[1])
    assert "uids" in await fail(client, "email_set_flags", uids=[], add=["seen"])
    monkeypatch.setenv("COMMS_IMAP_PASSWORD", "wrong")
    assert "IMAP" in await fail(client, "email_list_mailboxes")
    monkeypatch.setenv("COMMS_IMAP_PORT", str(svc.free_port()))
    assert "cannot reach the IMAP server" in await fail(client, "email_list")


async def test_mqtt_publish_and_collect(client: Client, mqtt: int) -> None:
    await call(client, "mqtt_publish", topic="home/kitchen/temp", payload="21.5", retain=True, qos=1)
    retained = await call(client, "mqtt_collect", topics=["home/+/temp"], max_messages=1, seconds=5)
    assert retained["rows"] == [["home/kitchen/temp", "21.5", "text", 0, True]]
    assert retained["complete"] is True

    raw = base64.b64encode(b"\xff\x01").decode()
    await call(client, "mqtt_publish", topic="raw/bin", payload=raw, encoding="base64", retain=True, qos=2)
    binary = await call(client, "mqtt_collect", topics=["raw/#"], max_messages=1, seconds=5)
    assert binary["rows"] == [["raw/bin", raw, "base64", 0, True]]

    # Live messages: publish s0, s1, s2, s0, ... until the collector has three; it only sees those sent after it
    # subscribed, so it gets three consecutive ones of the cycle.
    results: dict[str, Any] = {}
    collected = anyio.Event()

    async def collect() -> None:
        results["live"] = await call(client, "mqtt_collect", topics=["sensors/#"], max_messages=3, seconds=15, qos=1)
        collected.set()

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(collect)
        sent = 0
        while not collected.is_set() and sent < 300:
            await call(client, "mqtt_publish", topic=f"sensors/s{sent % 3}", payload=f"v{sent % 3}", qos=1)
            sent += 1
            await anyio.sleep(0.05)
    rows = [r[:2] for r in results["live"]["rows"]]
    assert len(rows) == 3
    assert sorted(rows) == [["sensors/s0", "v0"], ["sensors/s1", "v1"], ["sensors/s2", "v2"]]
    first = int(rows[0][1][1])
    assert [r[1] for r in rows] == [f"v{(first + k) % 3}" for k in range(3)]  # in publish order
    assert time.monotonic() - started < 10  # returned on the third message, not after 15 s

    quiet = await call(client, "mqtt_collect", topics=["nobody/talks"], seconds=0.5)
    assert quiet["rowCount"] == 0
    assert quiet["complete"] is False
    assert "topic" in await fail(client, "mqtt_publish", topic="bad/#", payload="x")
    assert "bad topic filter" in await fail(client, "mqtt_collect", topics=["a/#/b"], seconds=1)


async def test_mqtt_unreachable_broker(client: Client, mqtt: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMS_MQTT_PORT", str(svc.free_port()))
    assert "cannot reach the MQTT broker" in await fail(client, "mqtt_publish", topic="a", payload="b")


async def test_webhooks_and_notify(client: Client, hooks: svc.Receiver) -> None:
    slack = await call(client, "slack_webhook_post", text="*deploy* done", blocks=[{"type": "divider"}])
    assert slack == {"status": 200, "answer": "ok"}
    assert hooks.requests[-1] == (f"/slack/{TOKEN}", {"text": "*deploy* done", "blocks": [{"type": "divider"}]})

    discord = await call(
        client,
        "discord_webhook_post",
        content="build green",
        username="CI",
        embeds=[{"title": "main", "url": "https://ci.test/1", "color": 65280}],
    )
    assert discord == {"status": 200, "messageId": "1187"}
    path, body = hooks.requests[-1]
    assert path == f"/discord/1/{TOKEN}?wait=true"
    assert body["embeds"] == [{"title": "main", "url": "https://ci.test/1", "color": 65280}]
    assert body["username"] == "CI"

    hook = await call(client, "webhook_post", target="ci", payload={"ref": "main", "n": 3})
    assert hook == {"target": "ci", "status": 200, "answer": {"accepted": True}}
    assert hooks.requests[-1] == (f"/hook/ci?token={TOKEN}", {"ref": "main", "n": 3})

    failed = await fail(client, "webhook_post", target="broken", payload={})
    assert "HTTP 500" in failed
    assert TOKEN not in failed
    assert "configured: ['broken', 'ci']" in await fail(client, "webhook_post", target="nope", payload={})

    sent = await call(client, "notify", title="Disk", body="disk 91% full", kind="warning")
    assert sent == {"notified": ["ops"], "failed": []}
    apprise_path, apprise_body = hooks.requests[-1]
    assert apprise_path == f"/apprise/{TOKEN}"
    assert (apprise_body["title"], apprise_body["message"], apprise_body["type"]) == (
        "Disk",
        "disk 91% full",
        "warning",
    )
    assert "unknown targets" in await fail(client, "notify", body="x", targets=["pager"])


class Peer:
    """A plain-socket IRC user on the test side, to talk with the server's tools."""

    def __init__(self, port: int, nick: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buffer = b""
        self.send(f"NICK {nick}", f"USER {nick} 0 * :peer")
        self.until(" 001 ")

    def send(self, *lines: str) -> None:
        self.sock.sendall("".join(f"{line}\r\n" for line in lines).encode())

    def until(self, needle: str, timeout: float = 10) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\n" in self.buffer:
                raw, _, self.buffer = self.buffer.partition(b"\n")
                line = raw.decode().rstrip("\r")
                if line.startswith("PING"):
                    self.send("PONG" + line[4:])
                    continue
                seen.append(line)
                if needle in line:
                    return seen
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                self.buffer += self.sock.recv(4096)
            except TimeoutError:
                break
        raise AssertionError(f"{needle!r} not seen in {seen}")

    def close(self) -> None:
        self.sock.close()


async def test_irc_send_read_and_list(client: Client, irc: int) -> None:
    peer = await anyio.to_thread.run_sync(Peer, irc, "alice")
    try:
        peer.send("JOIN #ops", "TOPIC #ops :deploys and alerts")
        await anyio.to_thread.run_sync(peer.until, "TOPIC")

        sent = await call(client, "irc_send", target="#ops", messages=["deploy started", "line one\nline two"])
        assert sent["sent"] == 3
        assert sent["nick"] == "hubbot"
        lines = await anyio.to_thread.run_sync(peer.until, ":line two")
        said = [line.split(" :", 1)[1] for line in lines if " PRIVMSG #ops " in line]
        assert said == ["deploy started", "line one", "line two"]
        await call(client, "irc_send", target="alice", messages=["psst"], notice=True)
        assert "NOTICE alice :psst" in (await anyio.to_thread.run_sync(peer.until, ":psst"))[-1]

        results: dict[str, Any] = {}

        async def read() -> None:
            results["read"] = await call(client, "irc_read_channel", channel="#ops", seconds=20, max_messages=2)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await anyio.to_thread.run_sync(peer.until, "JOIN")  # the tool's nick joined
            peer.send("PRIVMSG #ops :hello bot", "PRIVMSG #ops :second")
        heard = results["read"]
        assert heard["topic"] == "deploys and alerts"
        assert [(r[1], r[3]) for r in heard["rows"] if r[2] == "privmsg"] == [
            ("alice", "hello bot"),
            ("alice", "second"),
        ]

        peer.send("JOIN #quiet")
        await anyio.to_thread.run_sync(peer.until, " 366 ")
        listed = await call(client, "irc_list_channels")
        channels = {r[0]: r for r in listed["rows"]}
        assert channels["#ops"][1:] == [1, "deploys and alerts"]
        assert "#quiet" in channels
        only = await call(client, "irc_list_channels", contains="qui")
        assert [r[0] for r in only["rows"]] == ["#quiet"]
    finally:
        peer.close()

    assert "channel" in await fail(client, "irc_read_channel", channel="no-hash")
    assert "nothing to send" in await fail(client, "irc_send", target="#ops", messages=["", "\n"])
    assert "cannot send to" in await fail(client, "irc_send", target="nobody_here", messages=["hi"])


async def test_irc_unreachable_server(client: Client, irc: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMS_IRC_PORT", str(svc.free_port()))
    assert "cannot reach the IRC server" in await fail(client, "irc_list_channels")


async def test_unconfigured_channels_name_the_variable(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "COMMS_MQTT_HOST",
        "COMMS_IRC_HOST",
        "COMMS_IMAP_HOST",
        "COMMS_SLACK_WEBHOOK_URL",
        "COMMS_NOTIFY_URLS",
    ):
        monkeypatch.delenv(name, raising=False)
    assert "COMMS_MQTT_HOST" in await fail(client, "mqtt_publish", topic="a", payload="b")
    assert "COMMS_IRC_HOST" in await fail(client, "irc_list_channels")
    assert "COMMS_IMAP_HOST" in await fail(client, "email_list")
    assert "COMMS_SLACK_WEBHOOK_URL" in await fail(client, "slack_webhook_post", text="x")
    assert "COMMS_NOTIFY_URLS" in await fail(client, "notify", body="x")
