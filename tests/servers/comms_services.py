"""Real services for the comms server tests, each on a free loopback port, started and stopped by the tests.

Dovecot (IMAP, a passwd-file user, Maildir in a temp dir), mosquitto (MQTT), ngircd (IRC), aiosmtpd (SMTP with
STARTTLS and AUTH, a self-signed certificate made here) and a threaded HTTP receiver for webhooks.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

READY_TIMEOUT = 20.0
IMAP_USER, IMAP_PASSWORD = "ana", "imap-pw-1"
SMTP_USER, SMTP_PASSWORD = "mailer", "smtp-pw-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes] | None, log: Path | None) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                detail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
                raise RuntimeError(f"service on port {port} did not start: {detail}") from None
            time.sleep(0.05)


@contextmanager
def process(args: list[str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc, log)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def dovecot(cert: Path, key: Path) -> Iterator[tuple[int, int]]:
    """Dovecot IMAP in the foreground (``-F``) on loopback: (plain/STARTTLS port, implicit-TLS port), one user with
    INBOX, Archive and Trash."""
    port, tls_port = free_port(), free_port()
    root = Path(tempfile.mkdtemp(prefix="comms-dovecot-"))
    root.chmod(0o755)  # the mail processes run as an unprivileged user and must reach the Maildir
    try:
        (root / "mail").mkdir()
        if os.geteuid() == 0:
            service_user = login_user = mail_user = "dovecot"
            login_user = "dovenull"
            shutil.chown(root / "mail", mail_user, mail_user)
        else:
            service_user = login_user = mail_user = pwd.getpwuid(os.getuid()).pw_name
        (root / "users").write_text(f"{IMAP_USER}:{{PLAIN}}{IMAP_PASSWORD}\n")
        conf = root / "dovecot.conf"
        conf.write_text(f"""
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
first_valid_uid = 1
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {service_user}
default_login_user = {login_user}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = static
  args = uid={mail_user} gid={mail_user} home={root}/mail/%u
}}
mail_location = maildir:~/Maildir
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Archive {{
    auto = create
    special_use = \\Archive
  }}
  mailbox Trash {{
    auto = create
    special_use = \\Trash
  }}
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {tls_port}
  }}
}}
service anvil {{
  chroot =
}}
""")
        with process(["dovecot", "-F", "-c", str(conf)], port, root / "stdout.log"):
            wait_for_port(tls_port, None, None)
            yield port, tls_port
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def mosquitto(tmp: Path) -> Iterator[int]:
    port = free_port()
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    with process(["mosquitto", "-c", str(conf)], port, tmp / "mosquitto.log"):
        yield port


@contextmanager
def ngircd(tmp: Path) -> Iterator[int]:
    port = free_port()
    conf = tmp / "ngircd.conf"
    conf.write_text(
        f"[Global]\nName = irc.test.local\nInfo = comms tests\nListen = 127.0.0.1\nPorts = {port}\n"
        "MotdPhrase = hello\nAdminInfo1 = tests\nAdminInfo2 = here\nAdminEMail = t@example.org\n"
        "[Limits]\nConnectRetry = 60\nMaxNickLength = 30\n[Options]\nPAM = no\nIdent = no\nDNS = no\n"
    )
    with process(["ngircd", "-n", "-f", str(conf)], port, tmp / "ngircd.log"):
        yield port


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@dataclass
class Mailbox:
    """What the SMTP server received: one entry per accepted transaction."""

    received: list[tuple[str, list[str], Message, bool]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        implicit = server.transport is not None and server.transport.get_extra_info("ssl_object") is not None
        tls = session.ssl is not None or implicit
        self.received.append((str(envelope.mail_from), list(envelope.rcpt_tos), message_from_bytes(content), tls))
        return "250 OK"


def _authenticate(server: Any, session: Session, envelope: Envelope, mechanism: str, data: Any) -> AuthResult:
    good = isinstance(data, LoginPassword) and (data.login, data.password) == (
        SMTP_USER.encode(),
        SMTP_PASSWORD.encode(),
    )
    return AuthResult(success=good, handled=False)


@contextmanager
def smtp(cert: Path, key: Path, *, implicit_tls: bool = False) -> Iterator[tuple[int, Mailbox]]:
    """aiosmtpd requiring STARTTLS and AUTH (LOGIN/PLAIN) before mail, or speaking implicit TLS without AUTH
    (aiosmtpd counts only STARTTLS as TLS for AUTH)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    mailbox = Mailbox()
    options: dict[str, Any] = (
        {"ssl_context": context}
        if implicit_tls
        else {"tls_context": context, "require_starttls": True, "authenticator": _authenticate, "auth_required": True}
    )
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port(), ready_timeout=READY_TIMEOUT, **options)
    controller.start()
    try:
        yield controller.port, mailbox
    finally:
        controller.stop()


@dataclass
class Receiver:
    """Requests the webhook receiver got: (path with query, JSON body or text)."""

    url: str = ""
    requests: list[tuple[str, Any]] = field(default_factory=list)


@contextmanager
def receiver() -> Iterator[Receiver]:
    """HTTP on loopback answering like Slack (``/slack``), Discord (``/discord``), a hook or a failing endpoint."""
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                parsed: Any = json.loads(body)
            except ValueError:
                parsed = body.decode(errors="replace")
            got.requests.append((self.path, parsed))
            if self.path.startswith("/fail"):
                self._answer(500, b"boom", "text/plain")
            elif self.path.startswith("/slack"):
                self._answer(200, b"ok", "text/plain")
            elif self.path.startswith("/discord"):
                self._answer(
                    200, json.dumps({"id": "1187", "content": parsed.get("content")}).encode(), "application/json"
                )
            else:
                self._answer(200, json.dumps({"accepted": True}).encode(), "application/json")

        def _answer(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
