"""robots.txt and sitemap parsing, and a polite breadth-first crawler that stays within a URL prefix.

The crawler honours robots.txt (and its Crawl-delay, capped), a depth limit, a page limit and an overall time
budget; every page it keeps goes through ``on_page`` (the indexer).
"""

from __future__ import annotations

import gzip
import time
import urllib.robotparser
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx2
from lxml import etree

from servers._common import ToolError
from servers.web_search import extract
from servers.web_search.fetch import USER_AGENT, Page, get

MAX_CRAWL_DELAY = 5.0
SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


def robots_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/robots.txt"


@dataclass
class Robots:
    """A parsed robots.txt (an absent one allows everything)."""

    url: str
    found: bool
    text: str
    parser: urllib.robotparser.RobotFileParser

    def allowed(self, url: str, agent: str = USER_AGENT) -> bool:
        return not self.found or self.parser.can_fetch(agent, url)

    def delay(self, agent: str = USER_AGENT) -> float | None:
        value = self.parser.crawl_delay(agent) if self.found else None
        return float(value) if value is not None else None


async def load_robots(http: httpx2.AsyncClient, url: str) -> Robots:
    """robots.txt of ``url``'s site; 4xx means none (allow all), 5xx or no answer means disallow all (RFC 9309)."""
    where = robots_url(url)
    parser = urllib.robotparser.RobotFileParser(where)
    try:
        page = await get(http, where, 500_000)
    except ToolError:
        parser.parse(["User-agent: *", "Disallow: /"])
        return Robots(where, True, "", parser)
    if page.status >= 500:
        parser.parse(["User-agent: *", "Disallow: /"])
        return Robots(where, True, "", parser)
    if page.status >= 400:
        return Robots(where, False, "", parser)
    text = page.text()
    parser.parse(text.splitlines())
    return Robots(where, True, text, parser)


def parse_sitemap(body: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    """(page entries with loc/lastmod/changefreq/priority, nested sitemap URLs) of a sitemap or sitemap index."""
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    try:
        root = etree.fromstring(body, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        raise ToolError(f"the sitemap is not valid XML: {exc}") from exc
    ns = SITEMAP_NS if root.tag.startswith(SITEMAP_NS) else ""
    if root.tag == f"{ns}sitemapindex":
        return [], [(s.findtext(f"{ns}loc") or "").strip() for s in root.findall(f"{ns}sitemap")]
    entries = []
    for node in root.findall(f"{ns}url"):
        entry = {k: (node.findtext(f"{ns}{k}") or "").strip() or None for k in ("loc", "lastmod", "changefreq",
                                                                                  "priority")}  # fmt: skip
        if entry["loc"]:
            entries.append(entry)
    return entries, []


async def read_sitemaps(http: httpx2.AsyncClient, url: str, max_urls: int, max_files: int = 20) -> dict[str, Any]:
    """Every page entry reachable from the sitemap at ``url`` (indexes followed, up to ``max_files`` files)."""
    pending = deque([url])
    seen: set[str] = set()
    entries: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    while pending and len(seen) < max_files and len(entries) < max_urls:
        current = pending.popleft()
        if current in seen:
            continue
        seen.add(current)
        page = await get(http, current, 20_000_000)
        if page.status >= 400:
            errors.append({"url": current, "error": f"status {page.status}"})
            continue
        found, nested = parse_sitemap(page.body)
        entries.extend(found[: max_urls - len(entries)])
        pending.extend(urljoin(current, n) for n in nested if n)
    return {"urls": entries, "sitemaps": sorted(seen), "errors": errors}


@dataclass
class CrawlReport:
    """What a crawl did."""

    indexed: list[str] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    stopped: str = "frontier exhausted"

    def skip(self, reason: str, url: str) -> None:
        bucket = self.skipped.setdefault(reason, [])
        if len(bucket) < 100:
            bucket.append(url)


@dataclass
class CrawlLimits:
    """Bounds of one crawl."""

    prefix: str
    max_depth: int
    max_pages: int
    max_seconds: float
    respect_robots: bool
    delay: float


async def _rules(http: httpx2.AsyncClient, cache: dict[str, Robots], url: str) -> Robots:
    site = robots_url(url)
    if site not in cache:
        cache[site] = await load_robots(http, url)
    return cache[site]


def _enqueue(
    found: list[str], depth: int, limits: CrawlLimits, seen: set[str], queue: deque[tuple[str, int]],
    report: CrawlReport,
) -> None:  # fmt: skip
    for link in found:
        if link in seen:
            continue
        if not link.startswith(limits.prefix):
            seen.add(link)
            report.skip("outside prefix", link)
        elif depth < limits.max_depth:
            seen.add(link)
            queue.append((link, depth + 1))
        else:
            report.skip("depth limit", link)


async def crawl(
    http: httpx2.AsyncClient,
    seeds: list[str],
    limits: CrawlLimits,
    on_page: Callable[[Page, str], Awaitable[list[str]]],
) -> CrawlReport:
    """Breadth-first from ``seeds``; ``on_page(page, html)`` indexes a page and returns its links."""
    report = CrawlReport()
    robots: dict[str, Robots] = {}
    queue: deque[tuple[str, int]] = deque((extract.normalize(s), 0) for s in seeds)
    seen = {u for u, _ in queue}
    started = time.monotonic()
    while queue:
        if len(report.indexed) >= limits.max_pages:
            report.stopped = f"max_pages={limits.max_pages} reached"
            break
        if time.monotonic() - started > limits.max_seconds:
            report.stopped = f"max_seconds={limits.max_seconds} reached"
            break
        url, depth = queue.popleft()
        rules = await _rules(http, robots, url) if limits.respect_robots else None
        if rules is not None and not rules.allowed(url):
            report.skip("robots", url)
            continue
        try:
            page = await get(http, url)
        except ToolError as exc:
            report.errors.append({"url": url, "error": str(exc)})
            continue
        final = extract.normalize(page.url)
        if final != url and (not final.startswith(limits.prefix) or final in seen):
            report.skip("redirected outside prefix" if not final.startswith(limits.prefix) else "redirect seen", url)
            continue
        seen.add(final)
        if page.status >= 400 or not page.is_html:
            report.skip(f"status {page.status}" if page.status >= 400 else "not html", url)
            continue
        found = await on_page(page, page.text())
        report.indexed.append(final)
        _enqueue(found, depth, limits, seen, queue, report)
        delay = max(limits.delay, min((rules.delay() if rules else None) or 0.0, MAX_CRAWL_DELAY))
        if delay and queue:
            await anyio.sleep(delay)
    return report
