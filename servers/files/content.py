"""Content tools: checksums, unified diffs, file type sniffing, text encodings and line/word statistics."""

from __future__ import annotations

import difflib
import hashlib
import mimetypes
import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import READ_ONLY, REPLACES
from servers._roots import AllowedRoots
from servers._toolset import Toolset, tool

MAX_TEXT_BYTES = 50 * 2**20
# (offset, signature, mime type, description): the magic bytes of common formats, most specific first.
MAGIC: tuple[tuple[int, bytes, str, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "image/png", "PNG image"),
    (0, b"\xff\xd8\xff", "image/jpeg", "JPEG image"),
    (0, b"GIF87a", "image/gif", "GIF image"),
    (0, b"GIF89a", "image/gif", "GIF image"),
    (0, b"%PDF-", "application/pdf", "PDF document"),
    (0, b"PK\x03\x04", "application/zip", "ZIP archive (also docx/xlsx/jar/wheel)"),
    (0, b"PK\x05\x06", "application/zip", "empty ZIP archive"),
    (0, b"\x1f\x8b", "application/gzip", "gzip compressed data"),
    (0, b"BZh", "application/x-bzip2", "bzip2 compressed data"),
    (0, b"\xfd7zXZ\x00", "application/x-xz", "xz compressed data"),
    (0, b"\x28\xb5\x2f\xfd", "application/zstd", "Zstandard compressed data"),
    (0, b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed", "7-Zip archive"),
    (257, b"ustar", "application/x-tar", "POSIX tar archive"),
    (0, b"\x7fELF", "application/x-executable", "ELF executable or library"),
    (0, b"MZ", "application/vnd.microsoft.portable-executable", "Windows PE executable"),
    (0, b"\xca\xfe\xba\xbe", "application/java-vm", "Java class file or Mach-O fat binary"),
    (0, b"\x00asm", "application/wasm", "WebAssembly module"),
    (0, b"SQLite format 3\x00", "application/vnd.sqlite3", "SQLite 3 database"),
    (0, b"PAR1", "application/vnd.apache.parquet", "Apache Parquet file"),
    (0, b"ID3", "audio/mpeg", "MP3 audio (ID3 tag)"),
    (0, b"OggS", "audio/ogg", "Ogg container"),
    (0, b"fLaC", "audio/flac", "FLAC audio"),
    (4, b"ftyp", "video/mp4", "ISO media (MP4/MOV/HEIC)"),
    (0, b"\x1a\x45\xdf\xa3", "video/webm", "Matroska/WebM video"),
)
RIFF_KINDS = {
    b"WEBP": ("image/webp", "WebP image"),
    b"WAVE": ("audio/wav", "WAV audio"),
    b"AVI ": ("video/x-msvideo", "AVI video"),
}


def sniff(head: bytes) -> tuple[str, str] | None:
    """The (mime type, description) that ``head``'s magic bytes announce, if any."""
    if head[:4] == b"RIFF" and head[8:12] in RIFF_KINDS:
        return RIFF_KINDS[head[8:12]]
    for offset, signature, mime, what in MAGIC:
        if head[offset : offset + len(signature)] == signature:
            return mime, what
    return None


def _read_text(path: Path, encoding: str | None) -> tuple[str, str]:
    """The text of ``path`` and the encoding used (detected by charset-normalizer when ``encoding`` is None)."""
    if path.stat().st_size > MAX_TEXT_BYTES:
        raise ToolError(f"{path.name} is larger than {MAX_TEXT_BYTES} bytes; too big for a text operation")
    data = path.read_bytes()
    if encoding is None:
        from charset_normalizer import from_bytes

        best = from_bytes(data).best()
        if best is None:
            raise ToolError(f"{path.name} does not look like text in any known encoding")
        encoding = best.encoding
    try:
        return data.decode(encoding), encoding
    except LookupError:
        raise ToolError(f"unknown encoding {encoding!r}") from None
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path.name} is not valid {encoding}: {exc.reason} at byte {exc.start}") from None


class ContentTools(Toolset):
    """Checksums, diffs, type and encoding detection, text statistics."""

    def __init__(self, roots: AllowedRoots) -> None:
        self.roots = roots

    @tool(
        name="checksum",
        description=(
            "Compute a cryptographic hash (md5, sha1, sha256, sha512, blake2b, sha3_256) of one or more files, "
            "optionally verifying an expected digest. Use to verify downloads or compare files. Returns a table of "
            "path, algorithm, hex digest, size and whether it matches `expected`."
        ),
        annotations=READ_ONLY,
    )
    def checksum(
        self,
        paths: Annotated[list[str], Field(min_length=1, max_length=500, description="files to hash")],
        algorithm: Annotated[
            Literal["md5", "sha1", "sha256", "sha512", "blake2b", "sha3_256"], Field(description="hash")
        ] = "sha256",
        expected: Annotated[str | None, Field(pattern="^[0-9a-fA-F]+$", description="hex digest to compare")] = None,
    ) -> CallToolResult:
        rows = []
        for raw in paths:
            path = self.roots.existing_file(raw)
            with path.open("rb") as fh:
                hexd = hashlib.file_digest(fh, algorithm).hexdigest()
            match = None if expected is None else hexd == expected.lower()
            rows.append([raw, algorithm, hexd, path.stat().st_size, match])
        return table_result(["path", "algorithm", "digest", "size", "matches"], rows)

    @tool(
        name="text_diff",
        description=(
            "Compare two text files line by line and return a unified diff (like diff -u) with `context` lines, "
            "plus counts of added and removed lines. Use to review changes between versions of a file."
        ),
        annotations=READ_ONLY,
    )
    def text_diff(
        self,
        left: Annotated[str, Field(description="original file")],
        right: Annotated[str, Field(description="changed file")],
        context: Annotated[int, Field(ge=0, le=100, description="unchanged lines around each change")] = 3,
        ignore_whitespace: Annotated[bool, Field(description="ignore trailing whitespace differences")] = False,
    ) -> CallToolResult:
        a_text, _ = _read_text(self.roots.existing_file(left), None)
        b_text, _ = _read_text(self.roots.existing_file(right), None)
        a, b = a_text.splitlines(), b_text.splitlines()
        if ignore_whitespace:
            a, b = [x.rstrip() for x in a], [x.rstrip() for x in b]
        diff = list(difflib.unified_diff(a, b, fromfile=left, tofile=right, n=context, lineterm=""))
        added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
        removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
        ratio = difflib.SequenceMatcher(None, a, b).ratio() if len(a) + len(b) < 20_000 else None
        body = "\n".join(diff)
        return json_result(
            {"identical": not diff, "added": added, "removed": removed, "similarity": ratio, "diff": body},
            text=body or "files are identical",
        )

    @tool(
        name="file_type",
        description=(
            "Identify what a file is from its magic bytes (PNG, PDF, ZIP, gzip, ELF, SQLite, Parquet...) and its "
            "extension, and whether it is text. Use before opening an unknown file. Returns the detected MIME type, a "
            "description, the MIME type guessed from the name, and whether the two agree."
        ),
        annotations=READ_ONLY,
    )
    def file_type(self, path: Annotated[str, Field(description="file to inspect")]) -> CallToolResult:
        real = self.roots.existing_file(path)
        with real.open("rb") as fh:
            head = fh.read(8192)
        by_name, _ = mimetypes.guess_type(real.name)
        sniffed = sniff(head)
        is_text = False
        if sniffed is None:
            if not head:
                sniffed = ("application/x-empty", "empty file")
            elif b"\x00" not in head:
                is_text = True
                sniffed = (by_name if by_name and by_name.startswith("text/") else "text/plain", "text")
            else:
                sniffed = ("application/octet-stream", "binary data")
        mime, what = sniffed
        return json_result(
            {
                "path": str(real),
                "mimeType": mime,
                "description": what,
                "mimeFromName": by_name,
                "agrees": by_name is None or by_name == mime,
                "isText": is_text,
                "size": real.stat().st_size,
            }
        )

    @tool(
        name="encoding_detect",
        description=(
            "Detect the character encoding of a text file (charset-normalizer): UTF-8, UTF-16, Latin-1, "
            "Windows-1252, Shift-JIS... Use before converting or when text shows mojibake. Returns the best guess, "
            "its language, whether a BOM is present and the next candidates."
        ),
        annotations=READ_ONLY,
    )
    def encoding_detect(self, path: Annotated[str, Field(description="file to inspect")]) -> CallToolResult:
        from charset_normalizer import from_bytes

        real = self.roots.existing_file(path)
        with real.open("rb") as fh:
            data = fh.read(MAX_TEXT_BYTES)
        matches = from_bytes(data)
        best = matches.best()
        if best is None:
            raise ToolError(f"{path} does not look like text in any known encoding (binary?)")
        return json_result(
            {
                "encoding": best.encoding,
                "language": best.language,
                "bom": best.bom,
                "confidence": round(1.0 - best.chaos, 3),
                "alternatives": [m.encoding for m in matches if m.encoding != best.encoding][:5],
            }
        )

    @tool(
        name="encoding_convert",
        description=(
            "Re-encode a text file from one character encoding to another (e.g. latin-1 or cp1252 to utf-8), "
            "detecting the source encoding when not given; optional newline normalisation. Writes `output` (or the "
            "file itself with overwrite). Returns source/target encodings and byte counts."
        ),
        annotations=REPLACES,
    )
    def encoding_convert(
        self,
        path: Annotated[str, Field(description="text file to convert")],
        target_encoding: Annotated[str, Field(min_length=1, description="e.g. utf-8, utf-16, cp1252")] = "utf-8",
        source_encoding: Annotated[str | None, Field(description="source encoding; detected when omitted")] = None,
        output: Annotated[str | None, Field(description="file to write; default: replace the input")] = None,
        newline: Annotated[Literal["keep", "lf", "crlf"], Field(description="line ending normalisation")] = "keep",
        overwrite: Annotated[bool, Field(description="allow replacing an existing file")] = False,
    ) -> CallToolResult:
        src = self.roots.existing_file(path)
        text, used = _read_text(src, source_encoding)
        if newline != "keep":
            text = re.sub(r"\r\n|\r|\n", "\n" if newline == "lf" else "\r\n", text)
        dst = self.roots.output_file(output or path, overwrite=overwrite)
        try:
            data = text.encode(target_encoding)
        except LookupError:
            raise ToolError(f"unknown target encoding {target_encoding!r}") from None
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            raise ToolError(f"{bad!r} at character {exc.start} cannot be written in {target_encoding}") from None
        before = src.stat().st_size
        dst.write_bytes(data)
        return json_result(
            {
                "output": str(dst),
                "sourceEncoding": used,
                "targetEncoding": target_encoding,
                "bytesIn": before,
                "bytesOut": len(data),
            }
        )

    @tool(
        name="text_stats",
        description=(
            "Count lines, words, characters and bytes of text files (like wc), plus blank lines, the longest line "
            "and optionally the most frequent words. Use to size up documents or logs. Returns one row per file."
        ),
        annotations=READ_ONLY,
    )
    def text_stats(
        self,
        paths: Annotated[list[str], Field(min_length=1, max_length=500, description="text files")],
        top_words: Annotated[int, Field(ge=0, le=100, description="also list the N most frequent words")] = 0,
    ) -> CallToolResult:
        rows = []
        words_total: Counter[str] = Counter()
        for raw in paths:
            real = self.roots.existing_file(raw)
            text, enc = _read_text(real, None)
            lines = text.splitlines()
            words = re.findall(r"\w+", text)
            if top_words:
                words_total.update(w.lower() for w in words)
            longest = max((len(x) for x in lines), default=0)
            blank = sum(1 for x in lines if not x.strip())
            rows.append([raw, len(lines), len(words), len(text), real.stat().st_size, blank, longest, enc])
        return table_result(
            ["path", "lines", "words", "chars", "bytes", "blankLines", "longestLine", "encoding"],
            rows,
            topWords=words_total.most_common(top_words) if top_words else None,
        )
