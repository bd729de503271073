"""Email tools: send over SMTP (text, HTML, attachments, STARTTLS or TLS) and read, move and flag over IMAP."""

from __future__ import annotations

import base64
import binascii
import email
import email.header
import email.message
import email.policy
import mimetypes
import smtplib
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from email.message import EmailMessage
from email.utils import make_msgid
from html.parser import HTMLParser
from typing import Annotated, Any, Literal

from imapclient import IMAPClient  # type: ignore[import-untyped]
from imapclient.exceptions import IMAPClientError  # type: ignore[import-untyped]
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from servers._common import ToolError, json_result, table_result
from servers.comms._settings import CommsSettings, require, settings, tls_context
from servers.comms.server import mcp

Address = Annotated[str, Field(pattern=r"^[^@\s<>]+@[^@\s<>]+$", max_length=320, description="name@example.org")]
Mailbox = Annotated[str, Field(min_length=1, max_length=255, description="mailbox (folder), e.g. INBOX or Archive")]
Uids = Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1, max_length=1000, description="message UIDs")]
Flag = Literal["seen", "flagged", "answered", "deleted", "draft"]
FLAGS: dict[str, bytes] = {
    f: f"\\{f.capitalize()}".encode() for f in ("seen", "flagged", "answered", "deleted", "draft")
}
MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024

SEND = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=True)
CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True)


class Attachment(BaseModel):
    """A file attached to an email."""

    filename: str = Field(min_length=1, max_length=255, pattern=r"^[^/\\]+$", description="e.g. report.csv")
    content: str = Field(max_length=14_000_000, description="the file: text, or base64 bytes")
    encoding: Literal["text", "base64"] = Field(default="text", description="how `content` is given")
    content_type: str | None = Field(default=None, pattern=r"^[\w.+-]+/[\w.+-]+$", description="guessed if omitted")


def _attach(message: EmailMessage, item: Attachment) -> None:
    if item.encoding == "base64":
        try:
            data = base64.b64decode(item.content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ToolError(f"attachment {item.filename!r} is not valid base64: {exc}") from exc
    else:
        data = item.content.encode("utf-8")
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise ToolError(f"attachment {item.filename!r} is over {MAX_ATTACHMENT_BYTES} bytes")
    kind = item.content_type or mimetypes.guess_type(item.filename)[0] or "application/octet-stream"
    maintype, subtype = kind.split("/", 1)
    message.add_attachment(data, maintype=maintype, subtype=subtype, filename=item.filename)


def _smtp(config: CommsSettings) -> smtplib.SMTP:
    host = require(config.smtp_host, "COMMS_SMTP_HOST", "SMTP")
    if config.smtp_security == "ssl":
        server: smtplib.SMTP = smtplib.SMTP_SSL(
            host, config.smtp_port, timeout=config.timeout_seconds, context=tls_context(config)
        )
    else:
        server = smtplib.SMTP(host, config.smtp_port, timeout=config.timeout_seconds)
        if config.smtp_security == "starttls":
            server.starttls(context=tls_context(config))
    if config.smtp_username:
        password = config.smtp_password.get_secret_value() if config.smtp_password else ""
        server.login(config.smtp_username, password)
    return server


@mcp.tool(
    description="Send an email over SMTP: plain text and/or HTML body, cc/bcc, reply-to and file attachments. The "
    "server, sender and login come from the hub's configuration (COMMS_SMTP_*). Returns the Message-ID and the "
    "recipients the server accepted.",
    annotations=SEND,
)
def email_send(
    to: Annotated[list[Address], Field(min_length=1, max_length=100, description="recipients")],
    subject: Annotated[str, Field(max_length=998, description="subject line")],
    text: Annotated[str | None, Field(max_length=1_000_000, description="plain-text body")] = None,
    html: Annotated[str | None, Field(max_length=2_000_000, description="HTML body")] = None,
    cc: Annotated[list[Address] | None, Field(max_length=100, description="copy to")] = None,
    bcc: Annotated[list[Address] | None, Field(max_length=100, description="blind copy to (not in headers)")] = None,
    reply_to: Address | None = None,
    attachments: Annotated[list[Attachment] | None, Field(max_length=20, description="files to attach")] = None,
) -> CallToolResult:
    if text is None and html is None:
        raise ToolError("give a body: text and/or html")
    config = settings()
    sender = require(config.smtp_from or config.smtp_username, "COMMS_SMTP_FROM", "the sender address")
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, ", ".join(to), subject
    if cc:
        message["Cc"] = ", ".join(cc)
    if reply_to:
        message["Reply-To"] = reply_to
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2])
    message.set_content(text if text is not None else _html_to_text(html or ""))
    if html is not None:
        message.add_alternative(html, subtype="html")
    for item in attachments or []:
        _attach(message, item)
    recipients = [*to, *(cc or []), *(bcc or [])]
    try:
        with _smtp(config) as server:
            refused = server.send_message(message, from_addr=sender, to_addrs=recipients)
    except smtplib.SMTPAuthenticationError as exc:
        raise ToolError(f"SMTP login refused ({exc.smtp_code}); check COMMS_SMTP_USERNAME/COMMS_SMTP_PASSWORD") from exc
    except smtplib.SMTPRecipientsRefused as exc:
        raise ToolError(f"every recipient was refused: {sorted(exc.recipients)}") from exc
    except (smtplib.SMTPException, OSError, ssl.SSLError) as exc:
        raise ToolError(f"sending failed: {type(exc).__name__}: {exc}") from exc
    accepted = [r for r in recipients if r not in refused]
    return json_result(
        {
            "messageId": message["Message-ID"],
            "accepted": accepted,
            "refused": sorted(refused),
            "bytes": len(bytes(message)),
        }
    )


class _TextExtractor(HTMLParser):
    BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"script", "style", "head"}:
            self._skip += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style", "head"}:
            self._skip = max(0, self._skip - 1)
        elif tag == "a" and self._href:
            self.parts.append(f" ({self._href})")
            self._href = None
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def _html_to_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    text: list[str] = []
    for line in lines:
        if line or (text and text[-1]):
            text.append(line)
    return "\n".join(text).strip()


@contextmanager
def _imap(mailbox: str | None = None, *, readonly: bool = True) -> Iterator[IMAPClient]:
    """A logged-in IMAP connection (optionally with ``mailbox`` selected); errors become tool errors."""
    config = settings()
    host = require(config.imap_host, "COMMS_IMAP_HOST", "IMAP")
    user = require(config.imap_username, "COMMS_IMAP_USERNAME", "the IMAP login")
    password = config.imap_password.get_secret_value() if config.imap_password else ""
    try:
        client = IMAPClient(
            host,
            port=config.imap_port,
            ssl=config.imap_security == "ssl",
            ssl_context=tls_context(config) if config.imap_security == "ssl" else None,
            timeout=config.timeout_seconds,
        )
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(f"cannot reach the IMAP server {host}:{config.imap_port}: {exc}") from exc
    try:
        if config.imap_security == "starttls":
            client.starttls(tls_context(config))
        client.login(user, password)
        if mailbox is not None:
            client.select_folder(mailbox, readonly=readonly)
        yield client
    except IMAPClientError as exc:
        raise ToolError(f"IMAP: {exc}") from exc
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(f"IMAP connection failed: {exc}") from exc
    finally:
        try:
            client.logout()
        except (IMAPClientError, OSError):
            client.shutdown()


def _decode(value: bytes | None) -> str:
    if not value:
        return ""
    return str(email.header.make_header(email.header.decode_header(value.decode("utf-8", errors="replace"))))


def _address(addresses: Any) -> str:
    found = []
    for a in addresses or []:
        mailbox, host = (a.mailbox or b"").decode(), (a.host or b"").decode()
        name = _decode(a.name)
        found.append(f"{name} <{mailbox}@{host}>" if name else f"{mailbox}@{host}")
    return ", ".join(found)


@mcp.tool(
    description="List the IMAP mailboxes (folders) with their message and unseen counts. Use it to find folder "
    "names for email_list and email_move.",
    annotations=READ,
)
def email_list_mailboxes() -> CallToolResult:
    with _imap() as client:
        rows = []
        for flags, _delimiter, name in client.list_folders():
            if b"\\Noselect" in flags:
                continue
            status = client.folder_status(name, [b"MESSAGES", b"UNSEEN"])
            special = [f.decode().lstrip("\\") for f in flags if f not in {b"\\HasNoChildren", b"\\HasChildren"}]
            rows.append([name, status.get(b"MESSAGES", 0), status.get(b"UNSEEN", 0), ",".join(special)])
    return table_result(["mailbox", "messages", "unseen", "flags"], rows)


@mcp.tool(
    description="Search a mailbox over IMAP and list matching messages newest first: by sender, subject or body "
    "text, date, and unseen/flagged state. Returns a table of uid, date, from, subject, flags and size; pass a uid "
    "to email_read to open one.",
    annotations=READ,
)
def email_list(
    mailbox: Mailbox = "INBOX",
    unseen_only: Annotated[bool, Field(description="only messages not yet read")] = False,
    flagged_only: Annotated[bool, Field(description="only flagged (starred) messages")] = False,
    from_contains: Annotated[str | None, Field(max_length=200, description="sender contains")] = None,
    subject_contains: Annotated[str | None, Field(max_length=200, description="subject contains")] = None,
    text_contains: Annotated[str | None, Field(max_length=200, description="headers or body contain")] = None,
    since: Annotated[date | None, Field(description="received on or after (YYYY-MM-DD)")] = None,
    limit: Annotated[int, Field(ge=1, le=500, description="most messages to list")] = 20,
) -> CallToolResult:
    criteria: list[Any] = []
    criteria += ["UNSEEN"] if unseen_only else []
    criteria += ["FLAGGED"] if flagged_only else []
    for key, value in (("FROM", from_contains), ("SUBJECT", subject_contains), ("TEXT", text_contains)):
        if value:
            criteria += [key, value]
    if since:
        criteria += ["SINCE", since]
    with _imap(mailbox) as client:
        uids = sorted(client.search(criteria or ["ALL"], charset="UTF-8" if criteria else None), reverse=True)
        chosen = uids[:limit]
        data = client.fetch(chosen, ["ENVELOPE", "FLAGS", "RFC822.SIZE"]) if chosen else {}
    rows = []
    for uid in chosen:
        envelope = data[uid][b"ENVELOPE"]
        flags = [f.decode().lstrip("\\").lower() for f in data[uid][b"FLAGS"]]
        when = envelope.date.isoformat(timespec="seconds") if envelope.date else ""
        rows.append([uid, when, _address(envelope.from_), _decode(envelope.subject), flags, data[uid][b"RFC822.SIZE"]])
    return table_result(["uid", "date", "from", "subject", "flags", "size"], rows, total=len(uids), mailbox=mailbox)


def _parts(message: EmailMessage, include_attachments: bool) -> dict[str, Any]:
    body_text = message.get_body(preferencelist=("plain",))
    body_html = message.get_body(preferencelist=("html",))
    html = body_html.get_content() if body_html is not None else None
    text = body_text.get_content() if body_text is not None else _html_to_text(html or "")
    attachments = []
    for part in message.iter_attachments():
        raw = part.get_payload(decode=True)
        payload = raw if isinstance(raw, bytes) else b""
        item: dict[str, Any] = {
            "filename": part.get_filename(),
            "contentType": part.get_content_type(),
            "size": len(payload),
        }
        if include_attachments:
            item["contentBase64"] = base64.b64encode(payload).decode("ascii")
        attachments.append(item)
    return {"text": text, "html": html, "attachments": attachments}


@mcp.tool(
    description="Open one email by uid: headers, the plain-text body (HTML converted to text when there is no "
    "text part), the raw HTML on request, and the attachments (names, types, sizes; their base64 content with "
    "include_attachments=true). Marks it read only with mark_seen=true.",
    annotations=READ,
)
def email_read(
    uid: Annotated[int, Field(ge=1, description="message uid from email_list")],
    mailbox: Mailbox = "INBOX",
    include_html: Annotated[bool, Field(description="also return the HTML body")] = False,
    include_attachments: Annotated[bool, Field(description="return attachment contents as base64")] = False,
    mark_seen: Annotated[bool, Field(description="set the \\Seen flag")] = False,
    max_chars: Annotated[int, Field(ge=100, le=1_000_000, description="cut the text body here")] = 50_000,
) -> CallToolResult:
    with _imap(mailbox, readonly=not mark_seen) as client:
        data = client.fetch([uid], ["BODY.PEEK[]", "FLAGS"])
        if uid not in data:
            raise ToolError(f"no message with uid {uid} in {mailbox}; list them with email_list")
        if mark_seen:
            client.add_flags([uid], [b"\\Seen"])
    message = email.message_from_bytes(data[uid][b"BODY[]"], policy=email.policy.default)
    if not isinstance(message, EmailMessage):  # pragma: no cover - policy.default always builds one
        raise ToolError("could not parse the message")
    parts = _parts(message, include_attachments)
    text = parts["text"]
    result = {
        "uid": uid,
        "mailbox": mailbox,
        "from": str(message.get("From", "")),
        "to": str(message.get("To", "")),
        "cc": str(message.get("Cc", "")),
        "date": str(message.get("Date", "")),
        "subject": str(message.get("Subject", "")),
        "messageId": str(message.get("Message-ID", "")),
        "flags": [f.decode().lstrip("\\").lower() for f in data[uid][b"FLAGS"]],
        "text": text[:max_chars],
        "truncated": len(text) > max_chars,
        "attachments": parts["attachments"],
    }
    if include_html:
        result["html"] = parts["html"]
    return json_result(result)


@mcp.tool(
    description="Move emails (by uid) from one mailbox to another, e.g. to Archive or Trash. Returns the uids moved.",
    annotations=CHANGE,
)
def email_move(uids: Uids, destination: Mailbox, mailbox: Mailbox = "INBOX") -> CallToolResult:
    with _imap(mailbox, readonly=False) as client:
        if not client.folder_exists(destination):
            raise ToolError(f"no mailbox {destination!r}; see email_list_mailboxes")
        present = sorted(client.search(["UID", ",".join(map(str, uids))]))
        missing = sorted(set(uids) - set(present))
        if present:
            if client.has_capability("MOVE"):
                client.move(present, destination)
            else:
                client.copy(present, destination)
                client.delete_messages(present)
                client.expunge()
    return json_result({"moved": present, "missing": missing, "from": mailbox, "to": destination})


@mcp.tool(
    description="Add or remove flags on emails by uid: seen (read), flagged (starred), answered, draft, deleted. "
    "With expunge=true, messages flagged deleted are removed for good. Returns each message's flags afterwards.",
    annotations=CHANGE,
)
def email_set_flags(
    uids: Uids,
    mailbox: Mailbox = "INBOX",
    add: Annotated[list[Flag] | None, Field(description="flags to set")] = None,
    remove: Annotated[list[Flag] | None, Field(description="flags to clear")] = None,
    expunge: Annotated[bool, Field(description="permanently remove messages flagged deleted")] = False,
) -> CallToolResult:
    if not add and not remove and not expunge:
        raise ToolError("nothing to do: give add, remove or expunge=true")
    with _imap(mailbox, readonly=False) as client:
        if add:
            client.add_flags(uids, [FLAGS[f] for f in add])
        if remove:
            client.remove_flags(uids, [FLAGS[f] for f in remove])
        flags = client.get_flags(uids)
        if expunge:
            client.expunge()
            remaining = set(client.search(["UID", ",".join(map(str, uids))]))
            flags = {u: f for u, f in flags.items() if u in remaining}
    rows = [[u, [f.decode().lstrip("\\").lower() for f in fl]] for u, fl in sorted(flags.items())]
    return table_result(["uid", "flags"], rows, expunged=[u for u in uids if expunge and u not in flags])
