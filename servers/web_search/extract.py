"""What is read out of an HTML page (BeautifulSoup on lxml): main text, links, metadata, tables, Markdown.

Main text: the page's ``<main>``, ``<article>`` or ``role=main`` element when there is one, else the body, with
scripts, styles, navigation, headers, footers, asides and forms removed.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from bs4 import BeautifulSoup, Tag
from markdownify import markdownify

BOILERPLATE = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "template", "svg", "iframe")
SPACES = re.compile(r"[ \t\r\f\v]+")
BLANKS = re.compile(r"\n{3,}")


def soup_of(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "lxml")


def main_element(soup: BeautifulSoup) -> Tag:
    """The element holding the page's main content (see the module docstring)."""
    for tag in soup(list(BOILERPLATE)):
        tag.decompose()
    for selector in ("main", "article", "[role=main]", "#content", ".content"):
        found = soup.select_one(selector)
        if isinstance(found, Tag) and len(found.get_text(strip=True)) > 40:
            return found
    return soup.body or soup


def clean_text(text: str) -> str:
    lines = [SPACES.sub(" ", line).strip() for line in text.splitlines()]
    return BLANKS.sub("\n\n", "\n".join(lines)).strip()


def main_text(html: str) -> str:
    return clean_text(main_element(soup_of(html)).get_text("\n"))


def title_of(soup: BeautifulSoup) -> str:
    if soup.title and soup.title.string:
        return soup.title.string.strip()
    h1 = soup.find("h1")
    return h1.get_text(" ", strip=True) if h1 else ""


def normalize(url: str) -> str:
    """The URL without its fragment (pages are keyed by it)."""
    return urldefrag(url)[0]


def links(html: str, base: str) -> list[dict[str, Any]]:
    """Every ``<a href>`` resolved against ``base`` (and ``<base href>``), fragments dropped, first text kept."""
    soup = soup_of(html)
    base_tag = soup.find("base", href=True)
    if isinstance(base_tag, Tag):
        base = urljoin(base, str(base_tag["href"]))
    host = urlsplit(base).netloc
    seen: dict[str, dict[str, Any]] = {}
    for a in soup.find_all("a", href=True):
        href = str(a["href"]).strip()
        if href.startswith(("javascript:", "mailto:", "tel:", "data:")):
            continue
        url = normalize(urljoin(base, href))
        if not url.startswith(("http://", "https://")) or url in seen:
            continue
        rel: Any = a.get("rel") or []
        seen[url] = {"url": url, "text": a.get_text(" ", strip=True)[:200],
                     "rel": " ".join(rel) if isinstance(rel, list) else str(rel),
                     "internal": urlsplit(url).netloc == host}  # fmt: skip
    return list(seen.values())


def metadata(html: str, base: str) -> dict[str, Any]:
    """Title, description, canonical URL, language, OpenGraph, Twitter card, JSON-LD and the heading outline."""
    soup = soup_of(html)
    meta: dict[str, str] = {}
    og: dict[str, str] = {}
    twitter: dict[str, str] = {}
    for tag in soup.find_all("meta"):
        key = str(tag.get("property") or tag.get("name") or "").strip()
        value = str(tag.get("content") or "").strip()
        if not key:
            continue
        if key.startswith("og:"):
            og[key[3:]] = value
        elif key.startswith("twitter:"):
            twitter[key[8:]] = value
        else:
            meta[key.lower()] = value
    canonical = soup.find("link", rel="canonical", href=True)
    json_ld = []
    for script in soup.find_all("script", type="application/ld+json"):
        try:
            json_ld.append(json.loads(script.string or ""))
        except ValueError:
            continue
    html_tag = soup.find("html")
    headings = [{"level": int(h.name[1]), "text": h.get_text(" ", strip=True)}
                for h in soup.find_all(["h1", "h2", "h3", "h4", "h5", "h6"])]  # fmt: skip
    return {
        "title": title_of(soup),
        "description": meta.get("description", ""),
        "canonical": urljoin(base, str(canonical["href"])) if isinstance(canonical, Tag) else None,
        "lang": html_tag.get("lang") if isinstance(html_tag, Tag) else None,
        "meta": meta, "openGraph": og, "twitter": twitter, "jsonLd": json_ld, "headings": headings,
    }  # fmt: skip


def tables(html: str) -> list[dict[str, Any]]:
    """Each ``<table>`` as header + rows of cell text (colspan repeats the cell; nested tables are separate)."""
    out = []
    for index, table in enumerate(soup_of(html).find_all("table")):
        rows: list[list[str]] = []
        header: list[str] = []
        for tr in table.find_all("tr"):
            if tr.find_parent("table") is not table:
                continue
            cells = tr.find_all(["th", "td"], recursive=False)
            values: list[str] = []
            for cell in cells:
                colspan = str(cell.get("colspan") or "1")
                span = int(colspan) if colspan.isdigit() else 1
                values.extend([cell.get_text(" ", strip=True)] * max(1, min(span, 100)))
            if not values:
                continue
            if not header and all(c.name == "th" for c in cells):
                header = values
            else:
                rows.append(values)
        caption = table.find("caption")
        width = max([len(header), *(len(r) for r in rows)], default=0)
        out.append({"index": index, "caption": caption.get_text(" ", strip=True) if caption else "",
                    "columns": header or [f"col{i + 1}" for i in range(width)], "rows": rows})  # fmt: skip
    return out


def to_markdown(html: str, *, main_only: bool = True) -> str:
    """The page (or its main content) as Markdown (ATX headings, links kept)."""
    soup = soup_of(html)
    element = main_element(soup) if main_only else (soup.body or soup)
    return clean_text(markdownify(str(element), heading_style="ATX", strip=["img"]))


def images(html: str, base: str) -> list[dict[str, Any]]:
    """Every ``<img>``: absolute src, alt text (None when the attribute is missing), size, lazy loading, srcset."""
    found = []
    for img in soup_of(html).find_all("img"):
        src = str(img.get("src") or img.get("data-src") or "").strip()
        srcset = str(img.get("srcset") or "")
        found.append({"src": urljoin(base, src) if src else None,
                      "alt": str(img["alt"]) if img.has_attr("alt") else None,
                      "width": str(img.get("width") or "") or None, "height": str(img.get("height") or "") or None,
                      "loading": str(img.get("loading") or "") or None,
                      "srcset": [urljoin(base, c.split()[0]) for c in srcset.split(",") if c.strip()]})  # fmt: skip
    return found


def find_text(
    text: str, pattern: Any, context: int, limit: int, *, timeout: float | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Up to ``limit`` matches of ``pattern`` (compiled by the ``regex`` package) in ``text`` with line number and
    ``context`` characters around; (matches, total count).

    Raises:
        TimeoutError: matching took longer than ``timeout`` seconds (the GIL is released while it runs).
    """
    matches: list[dict[str, Any]] = []
    total = 0
    for match in pattern.finditer(text, timeout=timeout, concurrent=True):
        if match.end() == match.start():
            continue
        total += 1
        if len(matches) < limit:
            start, end = match.span()
            matches.append({"match": match.group(0), "line": text.count("\n", 0, start) + 1, "offset": start,
                            "before": text[max(0, start - context): start].replace("\n", " "),
                            "after": text[end: end + context].replace("\n", " ")})  # fmt: skip
    return matches, total
