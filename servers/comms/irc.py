"""A small blocking IRC client (RFC 1459/2812 lines over a socket) with a deadline on every wait."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass

from servers._common import ToolError

MAX_LINE = 512
ERRORS_ON_JOIN = {"403", "405", "471", "473", "474", "475", "476", "477"}


@dataclass(frozen=True)
class Line:
    """One parsed line: ``:prefix COMMAND params... :trailing``."""

    prefix: str
    command: str
    params: list[str]

    @property
    def nick(self) -> str:
        return self.prefix.split("!", 1)[0]

    @classmethod
    def parse(cls, raw: str) -> Line:
        prefix = ""
        if raw.startswith(":"):
            prefix, _, raw = raw[1:].partition(" ")
        head, sep, trailing = raw.partition(" :")
        parts = head.split()
        params = parts[1:] + ([trailing] if sep else [])
        return cls(prefix, parts[0].upper() if parts else "", params)


class IrcSession:
    """A registered connection; ``lines()`` answers PINGs itself. Use as a context manager (QUIT on exit)."""

    def __init__(self, host: str, port: int, *, tls: ssl.SSLContext | None, timeout: float) -> None:
        self.timeout = timeout
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
            self.sock: socket.socket = tls.wrap_socket(raw, server_hostname=host) if tls else raw
        except (OSError, ssl.SSLError) as exc:
            raise ToolError(f"cannot reach the IRC server {host}:{port}: {exc}") from exc
        self._buffer = b""
        self.nick = ""

    def __enter__(self) -> IrcSession:
        return self

    def __exit__(self, *_exc: object) -> None:
        with contextlib.suppress(ToolError):
            self.send("QUIT :bye")
        self.sock.close()

    def send(self, line: str) -> None:
        data = line.encode("utf-8")[: MAX_LINE - 2] + b"\r\n"
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise ToolError(f"IRC connection lost: {exc}") from exc

    def lines(self, deadline: float) -> Iterator[Line]:
        """Lines until ``deadline`` (monotonic); PINGs are answered and not yielded."""
        while True:
            while b"\r\n" in self._buffer or b"\n" in self._buffer:
                raw, _, self._buffer = self._buffer.replace(b"\r\n", b"\n").partition(b"\n")
                line = Line.parse(raw.decode("utf-8", errors="replace"))
                if line.command == "PING":
                    self.send(f"PONG :{line.params[-1] if line.params else ''}")
                    continue
                if line.command == "ERROR":
                    raise ToolError(f"the IRC server closed the connection: {' '.join(line.params)}")
                yield line
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                return
            except OSError as exc:
                raise ToolError(f"IRC connection lost: {exc}") from exc
            if not chunk:
                raise ToolError("the IRC server closed the connection")
            self._buffer += chunk

    def register(self, nick: str, password: str | None) -> None:
        """PASS/NICK/USER, trying ``nick_``, ``nick__``... while the nick is taken; waits for the welcome (001)."""
        if password:
            self.send(f"PASS {password}")
        self.nick = nick
        self.send(f"NICK {nick}")
        self.send(f"USER {nick} 0 * :hanzo-hub comms")
        deadline = time.monotonic() + self.timeout
        for line in self.lines(deadline):
            if line.command == "001":
                self.nick = line.params[0] if line.params else self.nick
                return
            if line.command in {"432", "433", "436"}:
                self.nick = (self.nick + "_")[:30]
                self.send(f"NICK {self.nick}")
            elif line.command in {"464", "465"}:
                raise ToolError(f"the IRC server refused the login: {line.params[-1]}; check COMMS_IRC_PASSWORD")
        raise ToolError(f"no welcome from the IRC server within {self.timeout}s")

    def join(self, channel: str) -> str:
        """JOIN and wait for the end of the names list (366); returns the topic if the server sent one."""
        self.send(f"JOIN {channel}")
        topic = ""
        for line in self.lines(time.monotonic() + self.timeout):
            if line.command == "332" and len(line.params) >= 3:
                topic = line.params[2]
            elif line.command == "366":
                return topic
            elif line.command in ERRORS_ON_JOIN:
                raise ToolError(f"cannot join {channel}: {line.params[-1]}")
        raise ToolError(f"joining {channel} got no answer within {self.timeout}s")
