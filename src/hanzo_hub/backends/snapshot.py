"""Persisted per-server listings, so the hub answers ``tools/list`` without starting anything.

One JSON file per server, written atomically (temporary file, fsync, rename): a crash mid-write leaves the old
snapshot intact. A snapshot that cannot be read is ignored and logged; the server is then discovered live.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hanzo_hub.backends.listing import Listing

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1


def file_key(server: str) -> str:
    """A file name for ``server``: readable, and unique even when two names sanitize alike."""
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", server)[:40]
    return f"{readable}-{hashlib.blake2s(server.encode(), digest_size=4).hexdigest()}"


class SnapshotStore:
    """Reads and writes listings under one directory."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory

    def path_for(self, server: str) -> Path:
        """The snapshot file of ``server``."""
        return self._dir / f"{file_key(server)}.json"

    def load(self, server: str) -> Listing | None:
        """The stored listing of ``server``, or ``None`` if there is none or it is unreadable."""
        path = self.path_for(server)
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            logger.warning("ignoring unreadable snapshot %s", path)
            return None
        if data.get("format") != FORMAT_VERSION or data.get("server") != server:
            logger.warning("ignoring snapshot %s of another format or server", path)
            return None
        try:
            return Listing.from_json(data["listing"], source="snapshot", server=server)
        except (KeyError, TypeError, ValidationError):
            logger.warning("ignoring malformed snapshot %s", path)
            return None

    def save(self, server: str, listing: Listing) -> None:
        """Store ``listing`` for ``server`` atomically. Failures (a full disk) are logged, never raised."""
        path = self.path_for(server)
        body = {"format": FORMAT_VERSION, "server": server, "taken_at": time.time(), "listing": listing.to_json()}
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            with tmp.open("w", encoding="utf-8") as fh:
                json.dump(body, fh, separators=(",", ":"))
                fh.flush()
                os.fsync(fh.fileno())
            tmp.replace(path)
        except OSError as exc:  # the previous snapshot (if any) stays in place: the rename never happened
            logger.warning("could not write the snapshot of server %s: %s", server, exc.strerror or exc)
            with contextlib.suppress(OSError):  # the directory itself may be what failed
                tmp.unlink(missing_ok=True)
