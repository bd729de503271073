"""``LineLog``: a server's stderr reaches its file line by line, secrets replaced, other bytes untouched, the file
rotated at its size limit, and a failing disk costs log lines, never an exception."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hanzo_hub.line_log import MAX_LINE, LineLog
from hanzo_hub.sandbox.vault import Redactor

SECRET = "ghp_0123456789abcdefABCDEF"


def redacting(path: Path, **limits: int) -> LineLog:
    return LineLog(path, Redactor({"GITHUB_TOKEN": SECRET}).redact, **limits)


def test_a_secret_split_across_writes_is_redacted_and_only_whole_lines_are_written(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    log = redacting(path)
    log.write(b"login with " + SECRET[:7].encode())
    assert not path.exists() or path.read_bytes() == b""  # an unfinished line waits
    log.write(SECRET[7:].encode() + b" refused\nnext ")
    assert path.read_bytes() == b"login with [redacted:GITHUB_TOKEN] refused\n"
    log.write(b"line, never ended")
    log.close()
    assert path.read_bytes() == b"login with [redacted:GITHUB_TOKEN] refused\nnext line, never ended"


def test_bytes_that_are_not_utf8_are_kept_as_written(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    log = redacting(path)
    log.write(b"\xff\xfe latin-1 caf\xe9 and " + SECRET.encode() + b"\n")
    log.close()
    assert path.read_bytes() == b"\xff\xfe latin-1 caf\xe9 and [redacted:GITHUB_TOKEN]\n"


def test_without_a_redactor_lines_are_written_as_they_came(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"an earlier run\n")
    log = LineLog(path)
    log.write(b"token " + SECRET.encode() + b"\n")
    log.close()
    assert path.read_bytes() == b"an earlier run\ntoken " + SECRET.encode() + b"\n"


def test_a_line_without_end_is_written_once_it_passes_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    log = redacting(path)
    log.write(b"x" * MAX_LINE)
    assert not path.exists()
    log.write(b"y " + SECRET.encode())
    assert path.read_bytes() == b"x" * MAX_LINE + b"y [redacted:GITHUB_TOKEN]"
    log.close()


def test_the_file_rotates_at_its_limit_and_keeps_the_configured_backups(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    log = LineLog(path, max_bytes=100, backups=2)
    lines = [f"line {i:03d} ".encode() + b"." * 40 + b"\n" for i in range(12)]  # 50 bytes each: 2 lines per file
    for line in lines:
        log.write(line)
    log.write(b"last")
    log.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.log", "server.log.1", "server.log.2"]
    assert path.read_bytes() == b"last"
    assert (tmp_path / "server.log.1").read_bytes() == lines[10] + lines[11]
    assert (tmp_path / "server.log.2").read_bytes() == lines[8] + lines[9]
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert total <= 100 * 3  # bounded, however much the server writes


def test_without_backups_the_file_is_emptied_at_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    log = LineLog(path, max_bytes=10, backups=0)
    log.write(b"0123456789ab\nabc\n")  # a line over the limit fills a file alone; then the file empties
    log.write(b"def\n")
    assert path.read_bytes() == b"abc\ndef\n"
    log.write(b"ghi\n")  # would pass the limit: the file empties first
    log.close()
    assert [p.name for p in tmp_path.iterdir()] == ["server.log"]
    assert path.read_bytes() == b"ghi\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full to stand in for a full disk")
def test_a_full_disk_drops_lines_with_one_warning_and_the_log_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "server.log"
    path.symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    log = LineLog(path)
    with caplog.at_level(logging.WARNING, logger="hanzo_hub.line_log"):
        log.write(b"lost 1\n")  # no exception: it would reach the pipe's callback and close the server's stderr
        log.write(b"lost 2\n")
    warnings = [r.getMessage() for r in caplog.records if "cannot write the server log" in r.getMessage()]
    assert len(warnings) == 1
    assert "No space left on device" in warnings[0]
    with caplog.at_level(logging.INFO, logger="hanzo_hub.line_log"):
        path.unlink()  # room again: the next write reopens the file
        log.write(b"back\n")
        assert path.read_bytes() == b"back\n"
        path.unlink()
        path.symlink_to("/dev/full")  # full once more: a new episode warns again
        log.close()
        log.write(b"lost 3\n")
    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot write the server log" in m for m in messages) == 2
    assert any(m.startswith("writing the server log") and m.endswith("again") for m in messages)
