"""An append-only JSON Lines write-ahead log, one per persisted scope.

A write is appended and ``fsync``-ed before it is applied to the vector store and acknowledged, so an acknowledged
write survives a crash at any later point, and power loss too. At open the log is replayed (upserts and deletes are
idempotent) and then truncated. A torn last line (a write interrupted by the crash, never acknowledged) fails to
parse and is dropped, so an interrupted write cannot corrupt the store.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


class WriteAheadLog:
    """Synchronous; callers run it in a worker thread under their own lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None

    def _file(self) -> Any:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "ab")  # noqa: SIM115 - held open for appends until close
        return self._fh

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append ``records`` as one write and make them durable."""
        data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)
        fh = self._file()
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())

    def read(self) -> list[dict[str, Any]]:
        """Every complete record, in order; a torn or corrupt tail is skipped with a warning."""
        if not self.path.exists():
            return []
        records: list[dict[str, Any]] = []
        with open(self.path, "rb") as fh:
            for number, line in enumerate(fh, 1):
                if not line.endswith(b"\n"):
                    logger.warning("memory log %s: dropping a torn last line %d", self.path.name, number)
                    break
                try:
                    records.append(json.loads(line))
                except ValueError:
                    logger.warning("memory log %s: skipping corrupt line %d", self.path.name, number)
        return records

    def size(self) -> int:
        """Bytes in the log."""
        return self.path.stat().st_size if self.path.exists() else 0

    def truncate(self) -> None:
        """Empty the log (after its records are applied to the store)."""
        self.close()
        with open(self.path, "wb") as fh:
            os.fsync(fh.fileno())

    def close(self) -> None:
        """Close the file handle."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
