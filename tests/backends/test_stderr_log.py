"""``RedactedLog``: a server's stderr reaches the file line by line, secrets replaced, other bytes untouched."""

from __future__ import annotations

from pathlib import Path

from hanzo_hub.backends.stderr_log import MAX_LINE, RedactedLog
from hanzo_hub.sandbox.vault import Redactor

SECRET = "ghp_0123456789abcdefABCDEF"


def _log(path: Path) -> tuple[RedactedLog, Path]:
    file = path.open("ab")
    return RedactedLog(file, Redactor({"GITHUB_TOKEN": SECRET}).redact), path


def test_a_secret_split_across_writes_is_redacted_and_only_whole_lines_are_written(tmp_path: Path) -> None:
    log, path = _log(tmp_path / "server.log")
    log.write(b"login with " + SECRET[:7].encode())
    assert path.read_bytes() == b""  # an unfinished line waits
    log.write(SECRET[7:].encode() + b" refused\nnext ")
    assert path.read_bytes() == b"login with [redacted:GITHUB_TOKEN] refused\n"
    log.write(b"line, never ended")
    log.close()
    assert path.read_bytes().endswith(b"\nnext line, never ended")
    log.file.close()


def test_bytes_that_are_not_utf8_are_kept_as_written(tmp_path: Path) -> None:
    log, path = _log(tmp_path / "server.log")
    raw = b"\xff\xfe latin-1 caf\xe9 and " + SECRET.encode() + b"\n"
    log.write(raw)
    log.file.close()
    assert path.read_bytes() == b"\xff\xfe latin-1 caf\xe9 and [redacted:GITHUB_TOKEN]\n"


def test_a_line_without_end_is_written_once_it_passes_the_cap(tmp_path: Path) -> None:
    log, path = _log(tmp_path / "server.log")
    log.write(b"x" * MAX_LINE)
    assert path.read_bytes() == b""
    log.write(b"y " + SECRET.encode())
    assert path.read_bytes() == b"x" * MAX_LINE + b"y [redacted:GITHUB_TOKEN]"
    log.file.close()
