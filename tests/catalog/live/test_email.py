"""mcp-email-server against Dovecot IMAP and an aiosmtpd SMTP sink, both started here on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.catalog.live import services
from tests.catalog.live.helpers import Call, run_live

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SEEDED = (
    b"From: Alice <alice@example.com>\r\nTo: catalog@example.com\r\nSubject: Quarterly numbers\r\n"
    b"Message-ID: <seed-1@example.com>\r\nDate: Tue, 01 Dec 2026 09:00:00 +0000\r\n\r\n"
    b"Revenue is up 42 percent.\r\n"
)


@pytest.fixture(scope="module")
def mailbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.Mail]:
    with services.mail(tmp_path_factory.mktemp("mail")) as server:
        server.deliver(SEEDED, "seed-1")
        yield server


def account_env(mail: services.Mail) -> dict[str, str]:
    return {
        "MCP_EMAIL_SERVER_ACCOUNT_NAME": "work",
        "MCP_EMAIL_SERVER_EMAIL_ADDRESS": mail.address,
        "MCP_EMAIL_SERVER_PASSWORD": mail.password,
        "MCP_EMAIL_SERVER_IMAP_HOST": "127.0.0.1",
        "MCP_EMAIL_SERVER_IMAP_PORT": str(mail.imap_port),
        "MCP_EMAIL_SERVER_IMAP_SSL": "false",
        "MCP_EMAIL_SERVER_SMTP_HOST": "127.0.0.1",
        "MCP_EMAIL_SERVER_SMTP_PORT": str(mail.smtp_port),
        "MCP_EMAIL_SERVER_SMTP_SSL": "false",
        "MCP_EMAIL_SERVER_SMTP_START_SSL": "false",
        # the server's own send policy: an empty allowlist denies every recipient, no mutation is allowed by default
        "MCP_EMAIL_SERVER_ALLOWED_RECIPIENTS": "bob@example.com",
        "MCP_EMAIL_SERVER_ACCOUNT_ALLOWED_MUTATIONS": "draft,organize,send,append",
        "MCP_EMAIL_SERVER_DRAFTS_MAILBOX": "Drafts",
    }


async def test_email_reads_imap_and_sends_smtp(tmp_path: Path, mailbox: services.Mail) -> None:
    env = {**account_env(mailbox), "MCP_EMAIL_SERVER_CONFIG_PATH": str(tmp_path / "email" / "config.toml")}
    (tmp_path / "email").mkdir()
    calls = [
        Call("list_available_accounts", {}, "work"),
        Call("list_mailboxes", {"account_name": "work"}, "INBOX"),
        Call("list_emails_metadata", {"account_name": "work"}, "Quarterly numbers"),
        Call("get_emails_content", {"account_name": "work", "email_ids": ["1"]}, "Revenue is up 42 percent"),
        Call(
            "send_email",
            {
                "account_name": "work",
                "recipients": ["bob@example.com"],
                "subject": "Sent through the hub",
                "body": "Hello Bob, from hanzo-hub.",
            },
            "",
        ),
        Call("create_mailbox", {"account_name": "work", "mailbox": "Projects"}, "Projects"),
        Call("mark_emails_as_read", {"account_name": "work", "email_ids": ["1"]}, "1"),
        Call("move_emails", {"account_name": "work", "email_ids": ["1"], "destination_mailbox": "Projects"}, "1"),
        Call("list_emails_metadata", {"account_name": "work", "mailbox": "Projects"}, "Quarterly numbers"),
        Call("create_mailbox", {"account_name": "work", "mailbox": "Drafts"}, "Drafts"),
        Call("save_draft", {"account_name": "work", "subject": "Draft from the hub", "body": "later"}, ""),
        Call("list_allowed_recipients", {}, "bob@example.com"),
    ]
    await run_live("email", tmp_path, calls, env=env, call_timeout=60)
    delivered = mailbox.smtp_log.read_text(encoding="utf-8", errors="replace")
    assert "Sent through the hub" in delivered
    assert "TO bob@example.com" in delivered
    drafts = list((mailbox.maildir / ".Drafts" / "cur").glob("*")) + list(
        (mailbox.maildir / ".Drafts" / "new").glob("*")
    )
    assert any(b"Draft from the hub" in path.read_bytes() for path in drafts)  # stored by Dovecot, via IMAP APPEND
