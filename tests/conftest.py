"""Shared fixtures: an isolated hub home, a settings builder, and one ``connect`` fixture over every transport.

``connect`` is parametrised over the in-memory front server, streamable HTTP (uvicorn on an ephemeral port, in
this process) and stdio (a ``python -m hanzo_hub serve`` subprocess), each with a client in ``legacy`` and
``auto`` mode, so one test body exercises all six combinations.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import anyio
import mcp_types as types
import psutil
import pytest
import uvicorn
from mcp import Client, StdioServerParameters

from hanzo_hub.app import build_app
from hanzo_hub.config import HubSettings, load_settings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.fixtures.downstream import build

REPO = Path(__file__).resolve().parents[1]
FIXTURE = "tests.fixtures.downstream"

FAST_BACKENDS: dict[str, Any] = {
    "connect_timeout": 10.0,
    "call_timeout": 10.0,
    "shutdown_timeout": 2.0,
    "list_wait": 10.0,
    "idle_timeout": 0,
    "restart_backoff": 0.05,
    "restart_backoff_max": 0.2,
    "breaker_threshold": 3,
    "breaker_cooldown": 60.0,
}
"""Small bounds so failure paths finish quickly; tests override single keys."""


def inproc(target: str = "alpha", **extra: Any) -> dict[str, Any]:
    """A config entry for an in-process fixture server (``alpha``, ``beta``, ``gamma``, ``broken``)."""
    return {"target": f"{FIXTURE}:{target}", **extra}


def stdio(mode: str = "ok", name: str = "downstream", **extra: Any) -> dict[str, Any]:
    """A config entry launching the fixture server as a subprocess in ``mode`` (ok, garbage, exit, hang)."""
    return {"command": sys.executable, "args": ["-m", FIXTURE, mode, name], "cwd": str(REPO), **extra}


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's HANZO_HUB_* variables or writes into the real home directory."""
    for key in list(os.environ):
        if key.startswith("HANZO_HUB_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HANZO_HUB_HOME", str(tmp_path / "default-home"))
    # Memory is on by default; tests written for a hub without it keep it off unless they pass a memory section.
    monkeypatch.setenv(MEMORY_OFF, "false")


@pytest.fixture
def hub_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


MEMORY_OFF = "HANZO_HUB_MEMORY__ENABLED"
"""Set to ``false`` for every test (memory defaults to on); ``make_settings(memory=...)`` removes it."""


class MakeSettings(Protocol):
    def __call__(self, servers: dict[str, Any], **sections: Any) -> HubSettings: ...


@pytest.fixture
def make_settings(tmp_path: Path, hub_home: Path, monkeypatch: pytest.MonkeyPatch) -> MakeSettings:
    """Write a config file (Claude-style ``mcpServers`` plus hub sections) and load it with ``home=hub_home``.

    ``backends`` merges over ``FAST_BACKENDS``; other keyword arguments become top-level sections. A ``memory``
    section lifts the suite's memory-off default (``MEMORY_OFF``), for this hub and the processes it starts.
    """
    counter = iter(range(1000))

    def make(servers: dict[str, Any], **sections: Any) -> HubSettings:
        if "memory" in sections:
            monkeypatch.delenv(MEMORY_OFF, raising=False)
        body: dict[str, Any] = {"mcpServers": servers, **sections}
        # Also in the file: the SDK's stdio_client starts the hub with a minimal environment, without MEMORY_OFF.
        body.setdefault("memory", {"enabled": False})
        body["backends"] = {**FAST_BACKENDS, **sections.get("backends", {})}
        path = tmp_path / f"hub-{next(counter)}.json"
        path.write_text(json.dumps(body), encoding="utf-8")
        return load_settings(path, home=hub_home)

    return make


# -- serving the hub ----------------------------------------------------------------------------------------------


def hub_command(settings: HubSettings, *extra: str) -> list[str]:
    """argv for ``python -m hanzo_hub serve`` with ``settings``' config file and home."""
    assert settings.config_file is not None
    return [
        sys.executable,
        "-m",
        "hanzo_hub",
        "serve",
        "--config",
        str(settings.config_file),
        "--home",
        str(settings.home),
        "--log-level",
        "WARNING",
        *extra,
    ]


def tools_list_changed() -> tuple[anyio.Event, Callable[[object], Awaitable[None]]]:
    """An event set when a client hears ``notifications/tools/list_changed``, and the message handler that sets it."""
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    return changed, on_message


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def mounted_tmpfs(path: Path, options: str) -> Iterator[Path]:
    """A real tmpfs mounted at ``path`` with mount ``options`` (``size=1m``, ``ro``...), unmounted on exit; skips the
    test where mounting is not allowed (not root, or no mount namespace rights)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, timeout=30)


@contextmanager
def listening_process(argv: list[str], port: int, timeout: float = 30.0) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` (from the repository root, output discarded) until it accepts connections on ``port``; stop it
    on exit."""
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"{argv[1:4]} exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert time.monotonic() < deadline, f"{argv[1:4]} never listened"
                time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@asynccontextmanager
async def serve_http_in_process(settings: HubSettings) -> AsyncIterator[str]:
    """Serve ``build_app(settings)`` with uvicorn on an ephemeral port; yields the MCP endpoint URL.

    The socket is bound and listening before uvicorn starts, so a client connecting early just waits in the
    backlog until the lifespan (which opens the hub) has run: no readiness polling.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        build_app(settings), lifespan="on", log_config=None, access_log=False, timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                yield f"http://127.0.0.1:{port}{settings.http.path}"
            finally:
                server.should_exit = True
    finally:
        sock.close()


TRANSPORTS = [
    pytest.param(("memory", "legacy"), id="memory-legacy"),
    pytest.param(("memory", "auto"), id="memory-auto"),
    pytest.param(("http", "legacy"), id="http-legacy"),
    pytest.param(("http", "auto"), id="http-auto"),
    pytest.param(("stdio", "legacy"), id="stdio-legacy", marks=pytest.mark.integration),
    pytest.param(("stdio", "auto"), id="stdio-auto", marks=pytest.mark.integration),
]

Connect = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture(params=TRANSPORTS)
def connect(request: pytest.FixtureRequest) -> Connect:
    """``async with connect(settings, **client_kwargs) as client`` talks to a hub serving ``settings``."""
    transport, mode = request.param

    @asynccontextmanager
    async def open_client(settings: HubSettings, **kwargs: Any) -> AsyncIterator[Client]:
        if transport == "memory":
            async with Hub.open(settings) as hub, Client(build_server(hub), mode=mode, **kwargs) as client:
                yield client
        elif transport == "http":
            async with serve_http_in_process(settings) as url, Client(url, mode=mode, **kwargs) as client:
                yield client
        else:
            params = StdioServerParameters(command=sys.executable, args=hub_command(settings)[1:], cwd=str(REPO))
            async with Client(params, mode=mode, **kwargs) as client:
                yield client

    open_client.transport = transport  # type: ignore[attr-defined]
    open_client.mode = mode  # type: ignore[attr-defined]
    return open_client


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    """The client's protocol mode, for tests that build their own transport."""
    return str(request.param)


# -- waiting and processes ----------------------------------------------------------------------------------------


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> None:
    """Poll ``predicate`` until it holds; only for process and state checks that have no event to wait on."""
    with anyio.fail_after(timeout):
        while not predicate():  # noqa: ASYNC110 - processes and supervisor states offer no event
            await anyio.sleep(interval)


def live_children(pid: int | None = None) -> list[psutil.Process]:
    """Descendants of ``pid`` (default: this process) that are still alive (zombies count as gone)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    alive = []
    for child in children:
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child)
        except psutil.NoSuchProcess:
            continue
    return alive


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def no_leaked_children() -> Iterator[None]:
    """Fail a test that leaves any new child process of this process running."""
    before = {p.pid for p in live_children()}
    yield
    new = [p for p in live_children() if p.pid not in before]
    _gone, leaked = psutil.wait_procs(new, timeout=5)  # a process killed a moment ago may still be dying
    for proc in leaked:
        proc.kill()
    assert not leaked, f"child processes outlived the test: {[p.pid for p in leaked]}"


@pytest.fixture
async def fixture_tools() -> set[str]:
    """The tool names of the fixture server, as a direct connection lists them."""
    async with Client(build("direct")) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


class ResourceUpdates:
    """A client's ``message_handler`` that records the URIs of ``notifications/resources/updated`` it receives."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._got = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._got.set()

    async def wait_for(self, uri: str, timeout: float = 5.0) -> None:
        """Wait (bounded) until an update of ``uri`` has arrived."""
        with anyio.fail_after(timeout):
            while uri not in self.uris:
                await self._got.wait()
                self._got = anyio.Event()


def text_of(result: Any) -> str:
    """The concatenated text content of a tool result."""
    return "".join(getattr(block, "text", "") for block in result.content)


# -- a static page on loopback ------------------------------------------------------------------------------------


@contextmanager
def static_page(body: bytes, path: str = "/page.html") -> Iterator[str]:
    """Serve ``body`` as HTML for any GET from a thread of this process; yields the URL of ``path``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
