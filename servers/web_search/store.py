"""The page index: one SQLite file with the pages and an FTS5 table over title, description and text (BM25).

Methods are blocking; the tools call them in worker threads. Each call opens its own connection (WAL mode, busy
timeout), so concurrent tool calls never share a cursor.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from servers._common import ToolError

MAX_HTML_CHARS = 2_000_000
SCHEMA = """
CREATE TABLE IF NOT EXISTS pages(
    id INTEGER PRIMARY KEY, url TEXT UNIQUE NOT NULL, host TEXT NOT NULL, title TEXT, description TEXT,
    text TEXT, html TEXT, status INTEGER, content_type TEXT, fetched_at REAL, words INTEGER, links INTEGER);
CREATE VIRTUAL TABLE IF NOT EXISTS pages_fts USING fts5(
    title, description, text, content='pages', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS pages_ai AFTER INSERT ON pages BEGIN
    INSERT INTO pages_fts(rowid, title, description, text) VALUES (new.id, new.title, new.description, new.text);
END;
CREATE TRIGGER IF NOT EXISTS pages_ad AFTER DELETE ON pages BEGIN
    INSERT INTO pages_fts(pages_fts, rowid, title, description, text)
    VALUES ('delete', old.id, old.title, old.description, old.text);
END;
CREATE TRIGGER IF NOT EXISTS pages_au AFTER UPDATE ON pages BEGIN
    INSERT INTO pages_fts(pages_fts, rowid, title, description, text)
    VALUES ('delete', old.id, old.title, old.description, old.text);
    INSERT INTO pages_fts(rowid, title, description, text) VALUES (new.id, new.title, new.description, new.text);
END;
"""
WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(query: str, mode: str) -> str:
    """The FTS5 MATCH expression for ``query``: all words, any word, the exact phrase, or raw FTS5 syntax."""
    if mode == "fts":
        return query
    words = WORD.findall(query)
    if not words:
        raise ToolError("the query has no searchable words")
    if mode == "phrase":
        return '"' + " ".join(words) + '"'
    return (" OR " if mode == "any" else " AND ").join(f'"{w}"' for w in words)


class IndexStore:
    """The SQLite index at ``directory/index.sqlite3`` (created on first use)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "index.sqlite3"

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        self.directory.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
            with conn:
                yield conn
        except sqlite3.DatabaseError as exc:
            raise ToolError(f"index error: {exc}") from exc
        finally:
            conn.close()

    def upsert(self, page: dict[str, Any]) -> None:
        row = {
            **page,
            "host": urlsplit(page["url"]).netloc,
            "fetched_at": time.time(),
            "html": (page.get("html") or "")[:MAX_HTML_CHARS],
            "words": len(WORD.findall(page.get("text") or "")),
        }
        with self.connect() as conn:
            conn.execute(
                "INSERT INTO pages(url, host, title, description, text, html, status, content_type, fetched_at, words,"
                " links) VALUES (:url, :host, :title, :description, :text, :html, :status, :content_type,"
                " :fetched_at, :words, :links) ON CONFLICT(url) DO UPDATE SET host=excluded.host,"
                " title=excluded.title, description=excluded.description, text=excluded.text, html=excluded.html,"
                " status=excluded.status, content_type=excluded.content_type, fetched_at=excluded.fetched_at,"
                " words=excluded.words, links=excluded.links",
                row,
            )  # fmt: skip

    def search(self, query: str, mode: str, limit: int, url_prefix: str) -> list[dict[str, Any]]:
        sql = (
            "SELECT p.url, p.title, bm25(pages_fts, 8.0, 3.0, 1.0) AS score,"
            " snippet(pages_fts, 2, '**', '**', ' … ', 20) AS snippet"
            " FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid"
            " WHERE pages_fts MATCH ? AND p.url LIKE ? ESCAPE '\\' ORDER BY score LIMIT ?"
        )
        like = url_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        try:
            with self.connect() as conn:
                rows = conn.execute(sql, (fts_query(query, mode), like, limit)).fetchall()
        except ToolError as exc:
            raise ToolError(f"bad search query {query!r} ({exc}); use mode 'all' for plain words") from exc
        return [{**dict(r), "score": round(-r["score"], 4)} for r in rows]

    def get(self, url: str) -> dict[str, Any] | None:
        with self.connect() as conn:
            row = conn.execute("SELECT * FROM pages WHERE url = ?", (url,)).fetchone()
        return dict(row) if row else None

    def list(self, url_prefix: str, limit: int, offset: int) -> list[dict[str, Any]]:
        like = url_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT url, title, words, links, status, fetched_at FROM pages WHERE url LIKE ? ESCAPE '\\'"
                " ORDER BY url LIMIT ? OFFSET ?", (like, limit, offset),
            ).fetchall()  # fmt: skip
        return [dict(r) for r in rows]

    def delete(self, url: str | None, url_prefix: str | None) -> int:
        with self.connect() as conn:
            if url:
                cursor = conn.execute("DELETE FROM pages WHERE url = ?", (url,))
            else:
                like = (url_prefix or "").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                cursor = conn.execute("DELETE FROM pages WHERE url LIKE ? ESCAPE '\\'", (like,))
            return cursor.rowcount

    def stats(self) -> dict[str, Any]:
        with self.connect() as conn:
            total = conn.execute(
                "SELECT COUNT(*) AS pages, COALESCE(SUM(words), 0) AS words, MIN(fetched_at) AS oldest,"
                " MAX(fetched_at) AS newest FROM pages"
            ).fetchone()
            hosts = conn.execute(
                "SELECT host, COUNT(*) AS pages FROM pages GROUP BY host ORDER BY pages DESC, host LIMIT 50"
            ).fetchall()
        size = sum(p.stat().st_size for p in self.directory.glob("index.sqlite3*")) if self.directory.exists() else 0
        return {**dict(total), "hosts": [dict(h) for h in hosts], "bytes": size, "path": str(self.path)}
