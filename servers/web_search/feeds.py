"""RSS 2.0, RSS 1.0 (RDF) and Atom feeds parsed with lxml (no entities, no network), JSON Feed 1.x, and feed discovery
in an HTML page (``<link rel="alternate" type="application/rss+xml">``). Dates come back as ISO 8601 when they parse.
"""

from __future__ import annotations

import email.utils
import json
from datetime import datetime
from typing import Any
from urllib.parse import urljoin

from bs4 import BeautifulSoup
from lxml import etree

from servers._common import ToolError
from servers.web_search.extract import clean_text, soup_of

ATOM = "{http://www.w3.org/2005/Atom}"
RSS1 = "{http://purl.org/rss/1.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"
CONTENT = "{http://purl.org/rss/1.0/modules/content/}"
FEED_TYPES = ("application/rss+xml", "application/atom+xml", "application/feed+json", "application/rdf+xml")
SUMMARY_CHARS = 1000


def discover(html: str, base: str) -> list[dict[str, str]]:
    """The feeds an HTML page announces: URL, type and title."""
    found = []
    for link in soup_of(html).find_all("link", href=True):
        rel: Any = link.get("rel") or []
        rels = rel if isinstance(rel, list) else str(rel).split()
        kind = str(link.get("type") or "").lower()
        if "alternate" in rels and kind in FEED_TYPES:
            found.append({"url": urljoin(base, str(link["href"])), "type": kind, "title": str(link.get("title") or "")})
    return found


def iso_date(value: str | None) -> str | None:
    """An RFC 822 (RSS) or ISO 8601 (Atom) date as ISO 8601; other text unchanged."""
    if not value:
        return None
    value = value.strip()
    try:
        return email.utils.parsedate_to_datetime(value).isoformat()
    except (TypeError, ValueError, IndexError):
        pass
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        return value


def plain(markup: str | None) -> str:
    """HTML-in-feed text (summaries often carry markup) as plain text, capped."""
    if not markup:
        return ""
    text = clean_text(BeautifulSoup(markup, "lxml").get_text(" ")) if "<" in markup else clean_text(markup)
    return text[:SUMMARY_CHARS]


def text_of(node: Any, path: str) -> str | None:
    found = node.findtext(path)
    return found.strip() if isinstance(found, str) and found.strip() else None


def atom_link(node: Any) -> str | None:
    links = node.findall(f"{ATOM}link")
    for link in links:
        if link.get("rel", "alternate") == "alternate" and link.get("href"):
            return str(link.get("href"))
    return str(links[0].get("href")) if links and links[0].get("href") else None


def atom(root: Any, base: str) -> dict[str, Any]:
    entries = []
    for e in root.findall(f"{ATOM}entry"):
        link = atom_link(e)
        entries.append(
            {
                "title": plain(text_of(e, f"{ATOM}title")),
                "link": urljoin(base, link) if link else None,
                "id": text_of(e, f"{ATOM}id"),
                "published": iso_date(text_of(e, f"{ATOM}published")),
                "updated": iso_date(text_of(e, f"{ATOM}updated")),
                "author": text_of(e, f"{ATOM}author/{ATOM}name"),
                "summary": plain(text_of(e, f"{ATOM}summary") or text_of(e, f"{ATOM}content")),
                "categories": [str(c.get("term")) for c in e.findall(f"{ATOM}category") if c.get("term")],
            }
        )
    link = atom_link(root)
    return {"format": "atom", "title": plain(text_of(root, f"{ATOM}title")),
            "link": urljoin(base, link) if link else None, "description": plain(text_of(root, f"{ATOM}subtitle")),
            "updated": iso_date(text_of(root, f"{ATOM}updated")), "entries": entries}  # fmt: skip


def rss_item(item: Any, ns: str, base: str) -> dict[str, Any]:
    link = text_of(item, f"{ns}link")
    guid = text_of(item, "guid") or item.get("{http://www.w3.org/1999/02/22-rdf-syntax-ns#}about")
    return {"title": plain(text_of(item, f"{ns}title")), "link": urljoin(base, link) if link else None, "id": guid,
            "published": iso_date(text_of(item, "pubDate") or text_of(item, f"{DC}date")), "updated": None,
            "author": text_of(item, "author") or text_of(item, f"{DC}creator"),
            "summary": plain(text_of(item, f"{ns}description") or text_of(item, f"{CONTENT}encoded")),
            "categories": [c.text.strip() for c in item.findall("category") if c.text and c.text.strip()]}  # fmt: skip


def rss(root: Any, base: str) -> dict[str, Any]:
    ns = RSS1 if root.find(f"{RSS1}channel") is not None else ""
    channel = root.find(f"{ns}channel")
    if channel is None:
        raise ToolError("the RSS document has no <channel>")
    items = (root if ns else channel).findall(f"{ns}item")
    return {"format": "rss1" if ns else "rss2", "title": plain(text_of(channel, f"{ns}title")),
            "link": text_of(channel, f"{ns}link"), "description": plain(text_of(channel, f"{ns}description")),
            "updated": iso_date(text_of(channel, "lastBuildDate") or text_of(channel, f"{DC}date")),
            "entries": [rss_item(i, ns, base) for i in items]}  # fmt: skip


def json_feed(body: bytes, base: str) -> dict[str, Any]:
    """A JSON Feed (jsonfeed.org, version 1 or 1.1)."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ToolError(f"the feed is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or "jsonfeed.org" not in str(doc.get("version", "")):
        raise ToolError("not a JSON Feed (no jsonfeed.org version)")
    entries = []
    for item in doc.get("items") or []:
        if not isinstance(item, dict):
            continue
        authors = item.get("authors") or ([item["author"]] if isinstance(item.get("author"), dict) else [])
        link = item.get("url") or item.get("external_url")
        entries.append({"title": plain(item.get("title")), "link": urljoin(base, str(link)) if link else None,
                        "id": str(item["id"]) if item.get("id") is not None else None,
                        "published": iso_date(item.get("date_published")),
                        "updated": iso_date(item.get("date_modified")),
                        "author": ", ".join(str(a.get("name")) for a in authors if isinstance(a, dict)) or None,
                        "summary": plain(item.get("summary") or item.get("content_text") or item.get("content_html")),
                        "categories": [str(t) for t in item.get("tags") or []]})  # fmt: skip
    return {"format": "json", "title": plain(doc.get("title")), "link": doc.get("home_page_url"),
            "description": plain(doc.get("description")), "updated": None, "entries": entries}  # fmt: skip


def parse_feed(body: bytes, base: str) -> dict[str, Any]:
    """A feed document as its title, link, description, update time and entries."""
    if body.lstrip()[:1] == b"{":
        return json_feed(body, base)
    try:
        root = etree.fromstring(body, parser=etree.XMLParser(resolve_entities=False, no_network=True, recover=False))
    except etree.XMLSyntaxError as exc:
        raise ToolError(f"the feed is not valid XML: {exc}") from exc
    if root.tag == f"{ATOM}feed":
        return atom(root, base)
    if root.tag == "rss" or root.tag.endswith("}RDF"):
        return rss(root, base)
    raise ToolError(f"not an RSS or Atom feed (root element <{etree.QName(root).localname}>)")
