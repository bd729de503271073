"""The `files` server through the MCP protocol, on real files in a temporary root (and a forbidden one beside it)."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from servers._roots import AllowedRoots
from servers.files import search
from servers.files.server import build_server
from tests.servers.conftest import Client, err, ok

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "src" / "pkg").mkdir(parents=True)
    (base / "src" / "a.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (base / "src" / "pkg" / "b.py").write_text("def helper():\n    return 42  # TODO tidy\n")
    (base / "notes.txt").write_text("alpha beta\nbeta gamma\n\nbeta\n")
    (base / "copy1.bin").write_bytes(b"same-bytes" * 100)
    (base / "copy2.bin").write_bytes(b"same-bytes" * 100)
    (base / ".hidden").write_text("secret-ish")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("do not read")
    (base / "escape").symlink_to(outside)
    return base


@pytest.fixture
async def client(root: Path) -> AsyncIterator[Client]:
    async with Client(build_server(AllowedRoots([root]))) as c:
        yield c


async def test_a_runaway_regex_is_stopped(client: Client, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "GREP_SECONDS", 0.2)
    (root / "long.txt").write_text("a" * 40 + "!\n")  # (a|aa)+$ backtracks exponentially on it
    message = err(await client.call_tool("grep", {"regex": "(a|aa)+$", "pattern": "long.txt"}))
    assert "longer than 0.2 s" in message
    assert ok(await client.call_tool("grep", {"regex": "a+!$", "pattern": "long.txt"}))["count"] == 1


async def test_lists_all_tools(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert len(names) >= 10
    for tool in (await client.list_tools()).tools:
        assert tool.annotations is not None
        assert tool.annotations.open_world_hint is False


async def test_paths_outside_the_roots_and_through_symlinks_are_refused(client: Client, root: Path) -> None:
    assert "outside the allowed roots" in err(await client.call_tool("checksum", {"paths": ["../outside/secret.txt"]}))
    assert "outside the allowed roots" in err(await client.call_tool("checksum", {"paths": ["escape/secret.txt"]}))
    assert "outside the allowed roots" in err(await client.call_tool("text_stats", {"paths": ["/etc/hostname"]}))
    found = ok(await client.call_tool("find_files", {"pattern": "**/*.txt"}))
    assert [r[0] for r in found["rows"]] == ["notes.txt"]


async def test_archive_round_trip_zip_and_tar(client: Client, root: Path) -> None:
    made = ok(await client.call_tool("archive_create", {"paths": ["src", "notes.txt"], "output": "out/b.zip"}))
    assert made["members"] == 3
    listed = ok(await client.call_tool("archive_list", {"archive": "out/b.zip"}))
    assert {r[0] for r in listed["rows"]} == {"src/a.py", "src/pkg/b.py", "notes.txt"}
    done = ok(await client.call_tool("archive_extract", {"archive": "out/b.zip", "destination": "unz"}))
    assert done["extracted"] == 3
    assert (root / "unz" / "src" / "pkg" / "b.py").read_text() == (root / "src" / "pkg" / "b.py").read_text()
    tar = ok(await client.call_tool("archive_create", {"paths": ["src"], "output": "out/s.tar.gz", "format": "tar.gz"}))
    assert tar["members"] == 2
    assert tarfile.is_tarfile(root / "out" / "s.tar.gz")
    ok(await client.call_tool("archive_extract", {"archive": "out/s.tar.gz", "destination": "untar"}))
    assert (root / "untar" / "src" / "a.py").exists()
    again = err(await client.call_tool("archive_extract", {"archive": "out/s.tar.gz", "destination": "untar"}))
    assert "overwrite" in again
    # the symlink leading out of the root is skipped, never followed
    skipped = ok(await client.call_tool("archive_create", {"paths": ["."], "output": "out/all.zip"}))
    assert any("escape" in s for s in skipped["skipped"])
    with zipfile.ZipFile(root / "out" / "all.zip") as zf:
        assert not any("secret" in n for n in zf.namelist())


async def test_zip_slip_and_tar_link_escapes_extract_nothing(client: Client, root: Path) -> None:
    with zipfile.ZipFile(root / "evil.zip", "w") as zf:
        zf.writestr("ok.txt", "fine")
        zf.writestr("../../evil.txt", "pwned")
    message = err(await client.call_tool("archive_extract", {"archive": "evil.zip", "destination": "x"}))
    assert "zip-slip" in message
    assert not (root / "x" / "ok.txt").exists()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)
    (root / "evil.tar").write_bytes(buf.getvalue())
    assert "links outside" in err(
        await client.call_tool("archive_extract", {"archive": "evil.tar", "destination": "y"})
    )
    assert "neither a zip nor a tar" in err(await client.call_tool("archive_list", {"archive": "notes.txt"}))


async def test_checksum_matches_hashlib_and_verifies(client: Client, root: Path) -> None:
    want = hashlib.sha256((root / "notes.txt").read_bytes()).hexdigest()
    got = ok(await client.call_tool("checksum", {"paths": ["notes.txt"], "expected": want}))
    assert got["rows"][0][2] == want
    assert got["rows"][0][4] is True
    md5 = ok(await client.call_tool("checksum", {"paths": ["notes.txt"], "algorithm": "md5", "expected": "00"}))
    assert md5["rows"][0][4] is False
    assert "does not exist" in err(await client.call_tool("checksum", {"paths": ["nope.txt"]}))


async def test_text_diff_is_unified(client: Client, root: Path) -> None:
    (root / "v2.txt").write_text("alpha beta\nBETA gamma\n\nbeta\nnew line\n")
    diff = ok(await client.call_tool("text_diff", {"left": "notes.txt", "right": "v2.txt", "context": 1}))
    assert diff["added"] == 2
    assert diff["removed"] == 1
    assert "-beta gamma" in diff["diff"]
    assert "+BETA gamma" in diff["diff"]
    assert diff["diff"].startswith("--- notes.txt")
    same = ok(await client.call_tool("text_diff", {"left": "notes.txt", "right": "notes.txt"}))
    assert same["identical"] is True


async def test_find_files_filters_by_size_and_time(client: Client, root: Path) -> None:
    old = root / "src" / "a.py"
    os.utime(old, (time.time() - 86400 * 10, time.time() - 86400 * 10))
    recent = ok(await client.call_tool("find_files", {"pattern": "**/*.py", "modified_after": "2000-01-01T00:00:00"}))
    assert {r[0] for r in recent["rows"]} == {"src/a.py", "src/pkg/b.py"}
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - 86400))
    newer = ok(await client.call_tool("find_files", {"pattern": "**/*.py", "modified_after": cutoff}))
    assert [r[0] for r in newer["rows"]] == ["src/pkg/b.py"]
    big = ok(await client.call_tool("find_files", {"min_size": 500, "sort": "largest"}))
    assert {r[0] for r in big["rows"]} == {"copy1.bin", "copy2.bin"}
    assert "must not contain" in err(await client.call_tool("find_files", {"pattern": "../**"}))


async def test_grep_with_context_and_bad_regex(client: Client) -> None:
    found = ok(await client.call_tool("grep", {"regex": r"return \d+", "context": 1}))
    assert found["count"] == 1
    match = found["matches"][0]
    assert match["file"] == "src/pkg/b.py"
    assert match["line"] == 2
    assert match["before"] == ["def helper():"]
    ci = ok(await client.call_tool("grep", {"regex": "BETA", "ignore_case": True, "pattern": "*.txt"}))
    assert [m["line"] for m in ci["matches"]] == [1, 2, 4]
    assert "invalid regular expression" in err(await client.call_tool("grep", {"regex": "(unclosed"}))


async def test_tree_and_duplicates(client: Client) -> None:
    shown = ok(await client.call_tool("tree", {"depth": 2}))
    assert "├── src/" in shown["tree"]
    assert "b.py" not in shown["tree"]
    assert ".hidden" not in shown["tree"]
    deeper = ok(await client.call_tool("tree", {"depth": 3}))
    assert "b.py" in deeper["tree"]
    dups = ok(await client.call_tool("find_duplicates", {}))
    assert dups["groupCount"] == 1
    assert dups["groups"][0]["files"] == ["copy1.bin", "copy2.bin"]
    assert dups["wastedBytes"] == 1000


async def test_file_type_uses_magic_bytes(client: Client, root: Path) -> None:
    (root / "pic.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    png = ok(await client.call_tool("file_type", {"path": "pic.txt"}))
    assert png["mimeType"] == "image/png"
    assert png["agrees"] is False
    ok(await client.call_tool("archive_create", {"paths": ["notes.txt"], "output": "n.tar", "format": "tar"}))
    assert ok(await client.call_tool("file_type", {"path": "n.tar"}))["mimeType"] == "application/x-tar"
    txt = ok(await client.call_tool("file_type", {"path": "src/a.py"}))
    assert txt["isText"] is True


async def test_encoding_detect_and_convert(client: Client, root: Path) -> None:
    sample = "Ça coûte très cher à Genève, déjà dit. Où est la fenêtre? Élève, garçon, cœur. " * 6
    (root / "latin.txt").write_bytes(sample.encode("cp1252"))
    found = ok(await client.call_tool("encoding_detect", {"path": "latin.txt"}))
    assert found["encoding"] in {"cp1252", "latin_1", "iso8859_15", "cp1250"}
    args = {"path": "latin.txt", "output": "utf8.txt", "source_encoding": "cp1252"}
    conv = ok(await client.call_tool("encoding_convert", args))
    assert conv["targetEncoding"] == "utf-8"
    assert (root / "utf8.txt").read_bytes().decode("utf-8") == sample
    (root / "u16.txt").write_bytes("line one\nligne deux é\n".encode("utf-16"))
    assert ok(await client.call_tool("encoding_detect", {"path": "u16.txt"}))["bom"] is True
    detected = ok(
        await client.call_tool("encoding_convert", {"path": "u16.txt", "output": "u8.txt", "newline": "crlf"})
    )
    assert detected["sourceEncoding"].startswith("utf_16")
    assert (root / "u8.txt").read_bytes() == "line one\r\nligne deux é\r\n".encode()
    refuse = err(
        await client.call_tool("encoding_convert", {"path": "utf8.txt", "target_encoding": "ascii", "output": "a.txt"})
    )
    assert "cannot be written in ascii" in refuse
    assert "exists" in err(await client.call_tool("encoding_convert", {"path": "latin.txt"}))


async def test_text_stats_counts(client: Client) -> None:
    stats = ok(await client.call_tool("text_stats", {"paths": ["notes.txt"], "top_words": 1}))
    path, lines, words, _chars, _size, blank, longest, _enc = stats["rows"][0]
    assert (path, lines, words, blank, longest) == ("notes.txt", 4, 5, 1, 10)
    assert stats["topWords"] == [["beta", 3]]


async def test_convert_data_between_formats(client: Client, root: Path) -> None:
    (root / "cfg.toml").write_text('[server]\nname = "hub"\nport = 8080\n[server.limits]\nmax = 3\n')
    ok(await client.call_tool("convert_data", {"path": "cfg.toml", "output": "cfg.yaml"}))
    assert "port: 8080" in (root / "cfg.yaml").read_text()
    ok(await client.call_tool("convert_data", {"path": "cfg.yaml", "output": "cfg.json", "indent": 0}))
    assert (root / "cfg.json").read_text().startswith('{"server": {"name": "hub"')
    (root / "rows.json").write_text('[{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]')
    ok(await client.call_tool("convert_data", {"path": "rows.json", "output": "rows.csv"}))
    assert (root / "rows.csv").read_text() == "a,b\n1,x\n2,y\n"
    back = ok(await client.call_tool("convert_data", {"path": "rows.csv", "output": "rows.yaml"}))
    assert "a: '1'" in back["preview"]
    assert "needs a table" in err(await client.call_tool("convert_data", {"path": "rows.json", "output": "r.toml"}))
    (root / "bad.json").write_text("{oops")
    assert "not valid json" in err(await client.call_tool("convert_data", {"path": "bad.json", "output": "b.yaml"}))
    assert "exists" in err(await client.call_tool("convert_data", {"path": "rows.json", "output": "rows.csv"}))
    assert "cannot tell the format" in err(
        await client.call_tool("convert_data", {"path": "cfg.toml", "output": "x.ini"})
    )
