"""Real local services the catalog's live tests call into, each on a free loopback port and torn down afterwards.

Debian packages (``.ci/run`` installs them): ``redis-server``, ``memcached``, ``postgresql``, ``dovecot-imapd``.
Python services run from their own venvs built by ``scripts/install-test-servers``
(``third_party/python/requirements/{moto,jupyter-server,aiosmtpd,graphql}.txt``), never from the project's venv.
Every wait is bounded; a service that does not come up fails the test with its log.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

TEST_SERVERS = Path(os.environ.get("HANZO_TEST_SERVERS", REPO / ".cache" / "test-servers"))
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(ready: object, proc: subprocess.Popen[bytes], log: Path, what: str, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError):
            if ready():  # type: ignore[operator]
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f}s: {log.read_text(errors='replace')[-2000:]}")


def _port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status < 500)


@contextlib.contextmanager
def _process(cmd: list[str], log: Path, **kwargs: object) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def service_bin(venv: str, name: str) -> Path:
    """An executable of a test-service venv; it must have been built (scripts/install-test-servers)."""
    path = TEST_SERVERS / "venvs" / venv / "bin" / name
    if not path.exists():
        raise RuntimeError(f"{path} missing: run scripts/install-test-servers --python-only {venv}")
    return path


@contextlib.contextmanager
def redis(tmp: Path) -> Iterator[str]:
    """``redis-server`` on a free loopback port, nothing persisted; yields its URL."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = free_port()
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp)]
    with _process(cmd, tmp / "redis.log") as proc:
        _wait(lambda: _port_open(port), proc, tmp / "redis.log", "redis-server")
        yield f"redis://127.0.0.1:{port}/0"


@contextlib.contextmanager
def memcached(tmp: Path) -> Iterator[int]:
    """``memcached`` on a free loopback TCP port (no UDP); yields the port."""
    binary = shutil.which("memcached") or "/usr/bin/memcached"
    port = free_port()
    cmd = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "16", "-u", "nobody"]
    with _process(cmd, tmp / "memcached.log") as proc:
        _wait(lambda: _port_open(port), proc, tmp / "memcached.log", "memcached")
        yield port


def _pg_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(found[-1]) if found else (shutil.which(name) or name)


@dataclass(frozen=True)
class Postgres:
    port: int
    dsn: str


@contextlib.contextmanager
def postgres(tmp: Path) -> Iterator[Postgres]:
    """A throw-away PostgreSQL cluster (trust auth, loopback only), run as ``postgres`` when we are root.

    Root cannot run PostgreSQL, and pytest's temporary folders are private to root, so as root the cluster lives in
    its own ``/tmp/hanzo-pg-*`` folder owned by ``postgres`` (removed afterwards); ``tmp`` keeps the logs.
    """
    as_user: list[str] = []
    base = tmp
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        base = Path(tempfile.mkdtemp(prefix="hanzo-pg-"))
        os.chown(base, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, sock = base / "pgdata", base / "pgsock"
    try:
        init = subprocess.run(
            [*as_user, _pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
            capture_output=True,
            check=False,
            timeout=120,
        )
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {(init.stderr + init.stdout).decode(errors='replace')[-2000:]}")
        subprocess.run([*as_user, "mkdir", "-p", str(sock)], check=True, timeout=30)
        yield from _run_postgres(as_user, data, sock, tmp)
    finally:
        if base != tmp:
            shutil.rmtree(base, ignore_errors=True)


def _run_postgres(as_user: list[str], data: Path, sock: Path, tmp: Path) -> Iterator[Postgres]:
    port = free_port()
    cmd = [
        *as_user,
        _pg_bin("postgres"),
        "-D",
        str(data),
        "-p",
        str(port),
        "-k",
        str(sock),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "fsync=off",
    ]
    with _process(cmd, tmp / "postgres.log") as proc:
        _wait(lambda: _port_open(port), proc, tmp / "postgres.log", "postgres")
        yield Postgres(port, f"postgres://postgres@127.0.0.1:{port}/postgres?sslmode=disable")


@dataclass(frozen=True)
class Aws:
    endpoint: str
    env: dict[str, str]


@contextlib.contextmanager
def moto(tmp: Path) -> Iterator[Aws]:
    """``moto_server`` on loopback, plus AWS config files with a ``[default]`` profile pointing at it."""
    port = free_port()
    config, credentials = tmp / "aws-config", tmp / "aws-credentials"
    config.write_text("[default]\nregion = us-east-1\noutput = json\n", encoding="utf-8")
    credentials.write_text(
        "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n", encoding="utf-8"
    )
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_PROFILE": "default",
        "AWS_CONFIG_FILE": str(config),
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    cmd = [str(service_bin("moto", "moto_server")), "-H", "127.0.0.1", "-p", str(port)]
    with _process(cmd, tmp / "moto.log") as proc:
        _wait(lambda: _http_ok(f"{endpoint}/moto-api/"), proc, tmp / "moto.log", "moto_server")
        yield Aws(endpoint, env)


@dataclass(frozen=True)
class Jupyter:
    url: str
    token: str
    root: Path


@contextlib.contextmanager
def jupyter(tmp: Path) -> Iterator[Jupyter]:
    """A Jupyter server (with a Python kernel) rooted at ``tmp/notebooks`` on loopback."""
    root = tmp / "notebooks"
    root.mkdir(parents=True, exist_ok=True)
    port, token = free_port(), "catalog-test-token"
    cmd = [
        str(service_bin("jupyter-server", "jupyter")),
        "server",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        f"--IdentityProvider.token={token}",
        "--allow-root",
        "--no-browser",
        f"--ServerApp.root_dir={root}",
    ]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp / "jrt"), "JUPYTER_CONFIG_DIR": str(tmp / "jcfg")}
    url = f"http://127.0.0.1:{port}"
    with _process(cmd, tmp / "jupyter.log", env=env, cwd=root) as proc:  # its collaboration store lands in cwd
        _wait(lambda: _http_ok(f"{url}/api/status?token={token}"), proc, tmp / "jupyter.log", "jupyter server")
        yield Jupyter(url, token, root)


@dataclass(frozen=True)
class Mail:
    imap_port: int
    smtp_port: int
    address: str
    password: str
    maildir: Path
    smtp_log: Path

    def deliver(self, message: bytes, name: str) -> None:
        """Drop a message into the account's INBOX (Maildir ``new/``), as a local delivery agent would."""
        target = self.maildir / "new" / f"{name}.{os.getpid()}.catalog"
        target.write_bytes(message)
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(target, nobody.pw_uid, nobody.pw_gid)


_DOVECOT_CONF = """\
protocols = imap
listen = 127.0.0.1
base_dir = {base}/run
log_path = {base}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{base}/mail/%n
default_login_user = dovenull
default_internal_user = dovecot
first_valid_uid = 1
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {base}/users
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={base}/home/%n
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
"""


_SMTP_SINK = """
import asyncio, sys
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

port, log, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()

class Handler:
    async def handle_DATA(self, server, session, envelope):
        with open(log, "ab") as out:
            out.write(b"---- FROM " + envelope.mail_from.encode() + b" TO " + ",".join(envelope.rcpt_tos).encode())
            out.write(b"\\n" + envelope.original_content + b"\\n")
        return "250 Message accepted for delivery"

def authenticator(server, session, envelope, mechanism, auth_data):
    ok = getattr(auth_data, "login", None) == user and getattr(auth_data, "password", None) == password
    return AuthResult(success=ok)

controller = Controller(
    Handler(), hostname="127.0.0.1", port=port, authenticator=authenticator, auth_require_tls=False
)
controller.start()
print("ready", flush=True)
try:
    asyncio.run(asyncio.Event().wait())
finally:
    controller.stop()
"""
"""An SMTP server that needs AUTH (PLAIN/LOGIN without TLS, one account) and appends every message to a file."""


@contextlib.contextmanager
def mail(tmp: Path) -> Iterator[Mail]:
    """Dovecot IMAP (plain text auth, loopback, one Maildir account) plus an aiosmtpd SMTP server (AUTH required, the
    same account) that appends the messages it accepts to ``smtp_log``.

    Dovecot runs from its own config in a ``/tmp/hanzo-mail-*`` folder readable by its unprivileged users; the
    account's mail belongs to ``nobody``.
    """
    base = Path(tempfile.mkdtemp(prefix="hanzo-mail-"))
    os.chmod(base, 0o755)
    user, password = "catalog", "catalog-secret"
    address = f"{user}@example.com"
    nobody = pwd.getpwnam("nobody") if os.geteuid() == 0 else pwd.getpwuid(os.getuid())
    maildir = base / "mail" / user
    for folder in (maildir / "new", maildir / "cur", maildir / "tmp", base / "home" / user, base / "run"):
        folder.mkdir(parents=True, exist_ok=True)
    for folder in (base / "mail", maildir, maildir / "new", maildir / "cur", maildir / "tmp", base / "home" / user):
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    (base / "users").write_text(f"{user}:{{PLAIN}}{password}::::::\n{address}:{{PLAIN}}{password}::::::\n")
    imap_port, smtp_port = free_port(), free_port()
    conf = base / "dovecot.conf"
    conf.write_text(_DOVECOT_CONF.format(base=base, uid=nobody.pw_uid, gid=nobody.pw_gid, port=imap_port))
    smtp_log = tmp / "smtp-messages.log"
    smtp_log.touch()
    python = str(service_bin("aiosmtpd", "python"))
    smtp_cmd = [python, "-c", _SMTP_SINK, str(smtp_port), str(smtp_log), address, password]
    dovecot = shutil.which("dovecot") or "/usr/sbin/dovecot"
    try:
        with (
            _process([dovecot, "-F", "-c", str(conf)], tmp / "dovecot-stdout.log") as imap,
            _process(smtp_cmd, tmp / "smtp.log", env={**os.environ, "PYTHONUNBUFFERED": "1"}) as smtp,
        ):
            _wait(lambda: _port_open(imap_port), imap, base / "dovecot.log", "dovecot")
            _wait(lambda: _port_open(smtp_port), smtp, tmp / "smtp.log", "aiosmtpd")
            yield Mail(imap_port, smtp_port, address, password, maildir, smtp_log)
    finally:
        shutil.rmtree(base, ignore_errors=True)


_GRAPHQL_SERVER = """
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from graphql import build_schema, graphql_sync

schema = build_schema('''
type Book { id: Int!, title: String!, year: Int! }
type Query { books: [Book!]!, book(id: Int!): Book }
''')
BOOKS = [{"id": 1, "title": "Structure and Interpretation", "year": 1985}, {"id": 2, "title": "Dune", "year": 1965}]
root = {"books": lambda info: BOOKS, "book": lambda info, id: next((b for b in BOOKS if b["id"] == id), None)}

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: Node's fetch reuses its connection

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        variables = body.get("variables")
        if isinstance(variables, str):  # mcp-graphql forwards its variables argument as a JSON string
            variables = json.loads(variables)
        result = graphql_sync(schema, body.get("query", ""), root_value=root, variable_values=variables)
        out = {"data": result.data}
        if result.errors:
            out["errors"] = [error.formatted for error in result.errors]
        payload = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""
"""A GraphQL endpoint (graphql-core, a two-book schema) at ``/graphql``."""


@contextlib.contextmanager
def graphql(tmp: Path) -> Iterator[str]:
    """The GraphQL endpoint above on a free loopback port; yields its URL."""
    port = free_port()
    cmd = [str(service_bin("graphql", "python")), "-c", _GRAPHQL_SERVER, str(port)]
    with _process(cmd, tmp / "graphql.log") as proc:
        _wait(lambda: _port_open(port), proc, tmp / "graphql.log", "graphql server")
        yield f"http://127.0.0.1:{port}/graphql"


@contextlib.contextmanager
def local_process(cmd: list[str], log: Path, port: int, what: str) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` (output to ``log``) until it listens on loopback ``port``; stopped on exit."""
    with _process(cmd, log) as proc:
        _wait(lambda: _port_open(port), proc, log, what)
        yield proc


def seed_aws(aws: Aws, script: str) -> str:
    """Run a boto3 ``script`` against moto from moto's own venv (boto3 is not a project dependency); its stdout."""
    result = subprocess.run(
        [str(service_bin("moto", "python")), "-c", script],
        env={**os.environ, **aws.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"seeding moto failed: {result.stderr[-2000:]}")
    return result.stdout
