"""A downstream server's stderr on its way to ``<log_dir>/<server>.log``, with vault secrets replaced first.

A server that prints its credentials (a failed login echoing the token, a crash dumping its environment) must not
leave them on disk, nor in the error messages the supervisor builds from the log's last lines. Stderr is read on
the event loop (``hanzo_hub.backends.pipes``), cut into lines, and each whole line is redacted before it is written,
so a secret split across two writes of the server is still caught. A line longer than ``MAX_LINE`` is written in
pieces; a secret straddling such a cut could pass, which is why the cut is far above any credential's length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

__all__ = ["MAX_LINE", "RedactedLog"]

MAX_LINE = 64 * 1024
"""Bytes of one unfinished line held back before it is written anyway."""


class RedactedLog:
    """Writes a byte stream to ``file`` line by line, each line passed through ``redact``."""

    def __init__(self, file: IO[bytes], redact: Callable[[str], str]) -> None:
        self.file = file
        self.redact = redact
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        """Take the next bytes the server wrote; whole lines go to the file now, the unfinished rest waits."""
        self._pending += data
        cut = self._pending.rfind(b"\n") + 1
        if cut == 0 and len(self._pending) > MAX_LINE:
            cut = len(self._pending)
        if cut:
            self._write(bytes(self._pending[:cut]))
            del self._pending[:cut]

    def close(self) -> None:
        """The stream ended: write what is left (a last line without a newline)."""
        if self._pending:
            self._write(bytes(self._pending))
            self._pending.clear()

    def _write(self, chunk: bytes) -> None:
        # surrogateescape keeps bytes that are not UTF-8 exactly as the server wrote them
        text = self.redact(chunk.decode("utf-8", "surrogateescape"))
        self.file.write(text.encode("utf-8", "surrogateescape"))
        self.file.flush()  # the supervisor reads the log's tail when the server fails
