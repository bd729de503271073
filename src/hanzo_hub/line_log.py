"""An append-only log file written line by line: secrets replaced, size bounded, a full disk survived.

The hub reads every stdio server's stderr on the event loop (``hanzo_hub.backends.pipes``) and hands it to a
:class:`LineLog` for ``<log_dir>/<server>.log``; the policy guard's audit (``<log_dir>/audit.jsonl``), the LLM
gateway's usage ledger and request log, and the router's feedback file are appended through one each. A
:class:`LineLog`
- cuts its input into lines and, when it has a ``redact`` function (the vault holds secrets), passes each whole line
  through it before anything is written, so a server that prints its credentials leaves none on disk nor in the
  error messages the supervisor builds from the log's last lines, even when the secret arrives in two writes;
- rotates the file between lines, so it stays under ``max_bytes`` (``<server>.log`` -> ``<server>.log.1`` ...,
  ``backups`` old files kept), so a chatty server cannot fill the disk;
- survives a failing disk: a write that fails (disk full, file removed) drops those bytes and warns once, and the
  writer runs on (an exception in the pipe's callback would close the pipe, and the server's next write to stderr
  would fail; an audit write must never fail a call). Once a write succeeds again it says so, and the next failure
  warns again. A file that ends mid-line when it is opened (a write cut short by the full disk, a writer that died)
  gets a newline first, so the next record starts a line of its own.

A line longer than ``MAX_LINE`` is written in pieces; a secret straddling such a cut could pass, which is why the cut
is far above any credential's length.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

__all__ = ["MAX_LINE", "LineLog"]

logger = logging.getLogger(__name__)

MAX_LINE = 64 * 1024
"""Bytes of one unfinished line held back before it is written anyway."""


def _ends_a_line(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


class LineLog:
    """Appends bytes to ``path`` line by line, redacted and rotated; ``what`` names it in warnings."""

    def __init__(
        self,
        path: Path,
        redact: Callable[[str], str] | None = None,
        *,
        max_bytes: int = 0,
        backups: int = 2,
        what: str = "the server log",
        keep_open: bool = True,
    ) -> None:
        self.path = path
        self.what = what
        self.keep_open = keep_open
        """False: the file is closed after each write (for rare appends by objects without a close)."""
        self.redact = redact
        self.max_bytes = max_bytes
        """Rotate once the file reaches this size (0: never)."""
        self.backups = backups
        self._pending = bytearray()
        self._file: IO[bytes] | None = None
        self._size = 0
        self._warned = False
        self._whole = False
        """The file is known to end a line (checked at the first open, again after a failure or a last partial line)."""

    def write(self, data: bytes) -> None:
        """Take the next bytes; whole lines go to the file now, the unfinished rest waits."""
        self._pending += data
        cut = self._pending.rfind(b"\n") + 1
        if cut == 0 and len(self._pending) > MAX_LINE:
            cut = len(self._pending)
        if cut:
            self._emit(bytes(self._pending[:cut]))
            del self._pending[:cut]

    def close(self) -> None:
        """The stream ended: write what is left (a last line without a newline) and close the file."""
        if self._pending:
            self._emit(bytes(self._pending))
            self._pending.clear()
            self._whole = False  # that last line had no newline
        self._close_file()

    def _close_file(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                self._failed(exc)

    def _emit(self, chunk: bytes) -> None:
        if self.redact is not None:  # surrogateescape keeps bytes that are not UTF-8 exactly as the server wrote them
            chunk = self.redact(chunk.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        wrote = False
        try:
            while chunk:
                file = self._open()
                cut = self._fitting(chunk)
                if cut == 0:  # the next line does not fit in what is left: it starts the next file
                    self._rotate()
                    continue
                file.write(chunk[:cut])
                file.flush()  # the supervisor reads the log's tail when the server fails
                self._size += cut
                chunk = chunk[cut:]
                wrote = True
                if self.max_bytes and self._size >= self.max_bytes:
                    self._rotate()
        except OSError as exc:
            self._failed(exc)
            return
        if self._warned and wrote:  # something reached the file after a failure
            self._warned = False
            logger.info("writing %s %s again", self.what, self.path)
        if not self.keep_open:
            self._close_file()

    def _fitting(self, chunk: bytes) -> int:
        """How many bytes of ``chunk`` (whole lines) go into the current file before ``max_bytes``; 0: none, rotate
        first. A line longer than the limit goes alone into a file of its own."""
        room = self.max_bytes - self._size
        if not self.max_bytes or len(chunk) <= room:
            return len(chunk)
        cut = chunk.rfind(b"\n", 0, room) + 1
        if cut == 0 and self._size == 0:
            cut = chunk.find(b"\n") + 1 or len(chunk)
        return cut

    def _open(self) -> IO[bytes]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            file = self.path.open("ab")
            try:
                self._size = file.tell()
                if not self._whole and self._size and not _ends_a_line(self.path):
                    file.write(b"\n")
                    self._size += 1
                self._whole = True
            except OSError:
                with contextlib.suppress(OSError):
                    file.close()
                raise
            self._file = file
        return self._file

    def _rotate(self) -> None:
        """``path`` becomes ``path.1`` (older ones move up, the oldest beyond ``backups`` is dropped); a new file
        starts. With no backups the file is emptied instead."""
        assert self._file is not None
        self._file.close()
        self._file = None
        if self.backups <= 0:
            self.path.write_bytes(b"")
            return
        for n in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))

    def _failed(self, exc: OSError) -> None:
        self._whole = False  # a write may have been cut mid-line
        if self._file is not None:  # reopen on the next write (the disk may have room again, the file may be back)
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        if not self._warned:
            self._warned = True
            reason = exc.strerror or str(exc)
            logger.warning("cannot write %s %s (%s); dropping lines until it can", self.what, self.path, reason)
