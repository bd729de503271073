"""The ``web-search`` MCP server: crawl and index pages into a local SQLite FTS5 index, search it with BM25, and
read pages apart (links, metadata, tables, Markdown, robots.txt, sitemaps); ``live_tools`` adds the tools over live
pages (header audits, link checks, forms, diffs, feeds, text search, images).

The index lives in ``$HANZO_WEB_SEARCH_DIR`` (the manifest sets ``{home}/data/web-search``); ``build(directory)``
makes a server over any folder (the tests use a temporary one).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import anyio
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.web_search import crawl as crawling
from servers.web_search import extract, live_tools
from servers.web_search.fetch import Page, get_ok, html_of, off_loop, session
from servers.web_search.store import IndexStore

DIR_ENV = "HANZO_WEB_SEARCH_DIR"
READ_WEB = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)
INDEXING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=True)
READ_INDEX = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
DELETE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)

Url = Annotated[str, Field(pattern=r"^https?://\S+$", description="absolute http(s) URL")]
OptUrl = Annotated[str, Field(pattern=r"^(https?://\S+)?$", description="page URL to fetch ('' when html is given)")]
Html = Annotated[str, Field(description="HTML text to read instead of fetching url ('' = fetch url)")]
Prefix = Annotated[str, Field(description="only URLs starting with this ('' = all)")]


def default_dir() -> Path:
    """The index folder from the environment the manifest sets (a temporary folder otherwise)."""
    configured = os.environ.get(DIR_ENV)  # noqa: TID251 - the server's one setting, injected by its manifest
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "hanzo-web-search"


def page_record(page: Page, html: str) -> tuple[dict[str, Any], list[str]]:
    """The stored fields of a fetched page and its links."""
    meta = extract.metadata(html, page.url)
    found = [link["url"] for link in extract.links(html, page.url)]
    record = {"url": extract.normalize(page.url), "title": meta["title"], "description": meta["description"],
              "text": extract.main_text(html), "html": html, "status": page.status,
              "content_type": page.content_type, "links": len(found)}  # fmt: skip
    return record, found


def build(directory: Path) -> MCPServer:  # noqa: C901 - one nested function per tool
    """A web-search server whose index lives in ``directory``."""
    store = IndexStore(directory)
    mcp = MCPServer(
        "web-search",
        instructions="Crawl and index web pages into a local full-text index, then search it (BM25) and read "
        "cached pages. Also extracts links, metadata, tables, images and Markdown from any page, reads robots.txt, "
        "sitemaps and RSS/Atom feeds, audits response headers, checks links, lists and submits forms, finds text "
        "in pages and diffs a page against its indexed copy. URLs are governed by the hub's network policy.",
    )

    async def index_page(page: Page, html: str) -> list[str]:
        record, found = await anyio.to_thread.run_sync(page_record, page, html)
        await anyio.to_thread.run_sync(store.upsert, record)
        return found

    @mcp.tool(
        annotations=INDEXING,
        description="Crawl a site breadth-first from start_url, staying within prefix (default: the start URL's "
        "folder), honouring robots.txt, up to max_depth link hops and max_pages pages, and index every HTML page "
        "for web_search. Optionally seeds the crawl from the site's sitemap. Returns what was indexed and skipped.",
    )
    async def web_crawl(
        start_url: Url,
        prefix: Prefix = "",
        max_depth: Annotated[int, Field(ge=0, le=10)] = 2,
        max_pages: Annotated[int, Field(ge=1, le=2000)] = 50,
        respect_robots: bool = True,
        use_sitemap: bool = False,
        delay_seconds: Annotated[float, Field(ge=0, le=10, description="pause between requests")] = 0.0,
        max_seconds: Annotated[float, Field(gt=0, le=600, description="time budget of the crawl")] = 120.0,
    ) -> CallToolResult:
        if not urlsplit(start_url).path:
            start_url += "/"
        if not prefix:
            path = urlsplit(start_url).path
            prefix = start_url[: len(start_url) - len(path)] + (path[: path.rfind("/") + 1] or "/")
        if not start_url.startswith(prefix):
            raise ToolError(f"start_url {start_url} is outside prefix {prefix}")
        seeds = [start_url]
        async with session() as http:
            if use_sitemap:
                robots = await crawling.load_robots(http, start_url)
                sitemap_urls = robots.parser.site_maps() or [crawling.robots_url(start_url)[: -len("robots.txt")]
                                                             + "sitemap.xml"]  # fmt: skip
                for sitemap in sitemap_urls:
                    listed = await crawling.read_sitemaps(http, sitemap, max_pages)
                    seeds += [u["loc"] for u in listed["urls"] if u["loc"].startswith(prefix)]
            limits = crawling.CrawlLimits(prefix, max_depth, max_pages, max_seconds, respect_robots, delay_seconds)
            report = await crawling.crawl(http, seeds, limits, index_page)
        return json_result({"prefix": prefix, "indexed": report.indexed, "indexedCount": len(report.indexed),
                            "skipped": report.skipped, "errors": report.errors, "stopped": report.stopped})  # fmt: skip

    @mcp.tool(
        annotations=INDEXING,
        description="Fetch one URL, extract its title, description and main text, and add it to the local index "
        "(replacing an older copy). Returns the title, word count and the number of links found.",
    )
    async def web_index_url(url: Url) -> CallToolResult:
        async with session() as http:
            page = await get_ok(http, url)
        if not page.is_html:
            raise ToolError(f"{url} is {page.content_type or 'not HTML'}; only HTML pages are indexed")
        record, _ = await anyio.to_thread.run_sync(page_record, page, page.text())
        await anyio.to_thread.run_sync(store.upsert, record)
        stored = await anyio.to_thread.run_sync(store.get, record["url"])
        assert stored is not None
        return json_result({"url": stored["url"], "title": stored["title"], "words": stored["words"],
                            "links": stored["links"], "description": stored["description"]})  # fmt: skip

    @mcp.tool(
        annotations=READ_INDEX,
        description="Full-text search (BM25 ranking, stemmed) over the locally indexed pages. mode 'all' needs "
        "every word, 'any' one of them, 'phrase' the exact phrase, 'fts' takes raw SQLite FTS5 syntax (NEAR, "
        "prefix*, column:). Returns URL, title, score and a snippet with the matches in **bold**.",
    )
    async def web_search(
        query: Annotated[str, Field(min_length=1, description="the words to look for")],
        mode: Literal["all", "any", "phrase", "fts"] = "all",
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        url_prefix: Prefix = "",
    ) -> CallToolResult:
        hits = await anyio.to_thread.run_sync(store.search, query, mode, limit, url_prefix)
        return table_result(["url", "title", "score", "snippet"],
                            [[h["url"], h["title"], h["score"], h["snippet"]] for h in hits], query=query)  # fmt: skip

    @mcp.tool(
        annotations=READ_INDEX,
        description="Read a page from the local index without fetching it again: its main text, Markdown, or the "
        "stored HTML, with title and fetch time. Use after web_search to read a hit.",
    )
    async def web_get_page(
        url: Url,
        format: Literal["text", "markdown", "html"] = "text",
        max_chars: Annotated[int, Field(ge=100, le=2_000_000)] = 50_000,
    ) -> CallToolResult:
        stored = await anyio.to_thread.run_sync(store.get, extract.normalize(url))
        if stored is None:
            raise ToolError(f"{url} is not in the index; add it with web_index_url or web_crawl")
        body = (stored["text"] if format == "text" else stored["html"] if format == "html"
                else await anyio.to_thread.run_sync(extract.to_markdown, stored["html"]))  # fmt: skip
        return json_result(
            {
                "url": stored["url"],
                "title": stored["title"],
                "fetchedAt": stored["fetched_at"],
                "content": body[:max_chars],
                "truncated": len(body) > max_chars,
            },
            text=body[:max_chars],
        )

    @mcp.tool(
        annotations=READ_INDEX,
        description="List the pages in the local index (URL, title, words, links, fetch time), optionally under a "
        "URL prefix, sorted by URL with paging.",
    )
    async def web_list_pages(
        url_prefix: Prefix = "",
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> CallToolResult:
        rows = await anyio.to_thread.run_sync(store.list, url_prefix, limit, offset)
        return table_result(["url", "title", "words", "links", "status", "fetched_at"],
                            [[r[c] for c in ("url", "title", "words", "links", "status", "fetched_at")]
                             for r in rows])  # fmt: skip

    @mcp.tool(
        annotations=READ_INDEX,
        description="Statistics of the local index: pages, words, pages per host, oldest and newest fetch, size "
        "on disk and where it is stored.",
    )
    async def web_index_stats() -> CallToolResult:
        return json_result(await anyio.to_thread.run_sync(store.stats))

    @mcp.tool(
        annotations=DELETE,
        description="Delete pages from the local index: one URL, or every page under a URL prefix. Returns how "
        "many were removed. The pages can be indexed again later.",
    )
    async def web_delete(
        url: OptUrl = "",
        url_prefix: Annotated[str, Field(pattern=r"^(https?://\S+)?$", description="delete all under it")] = "",
    ) -> CallToolResult:
        if bool(url) == bool(url_prefix):
            raise ToolError("give exactly one of url or url_prefix")
        removed = await anyio.to_thread.run_sync(store.delete, extract.normalize(url) if url else None, url_prefix)
        return json_result({"removed": removed})

    @mcp.tool(
        annotations=READ_WEB,
        description="Extract the links of a page (fetched from url, or given as html): absolute URL, anchor text, "
        "rel, and whether it stays on the same host. Use to discover pages before crawling or indexing them.",
    )
    async def web_extract_links(url: OptUrl = "", html: Html = "", internal_only: bool = False) -> CallToolResult:
        text, base = await html_of(url, html)
        found = [link for link in await off_loop(extract.links, text, base) if link["internal"] or not internal_only]
        return table_result(["url", "text", "rel", "internal"],
                            [[x["url"], x["text"], x["rel"], x["internal"]] for x in found])  # fmt: skip

    @mcp.tool(
        annotations=READ_WEB,
        description="Read a site's robots.txt (for any URL of the site): the raw rules, declared sitemaps, "
        "Crawl-delay, and whether each of check_urls may be fetched by user_agent.",
    )
    async def web_robots(
        url: Url,
        check_urls: Annotated[list[str] | None, Field(description="URLs to test against the rules")] = None,
        user_agent: str = "*",
    ) -> CallToolResult:
        async with session() as http:
            robots = await crawling.load_robots(http, url)
        checks = [{"url": u, "allowed": robots.allowed(u, user_agent)} for u in check_urls or []]
        return json_result({"robotsUrl": robots.url, "found": robots.found, "sitemaps": robots.parser.site_maps() or [],
                            "crawlDelay": robots.delay(user_agent), "checks": checks, "text": robots.text})  # fmt: skip

    @mcp.tool(
        annotations=READ_WEB,
        description="Read a sitemap (XML, gzip or not), following sitemap indexes: every page URL with lastmod, "
        "changefreq and priority. Give the sitemap URL, or a site URL to use the sitemaps its robots.txt declares "
        "(else /sitemap.xml).",
    )
    async def web_sitemap(url: Url, max_urls: Annotated[int, Field(ge=1, le=50_000)] = 1000) -> CallToolResult:
        async with session() as http:
            targets = [url]
            if not urlsplit(url).path.endswith((".xml", ".gz")):
                robots = await crawling.load_robots(http, url)
                targets = robots.parser.site_maps() or [crawling.robots_url(url)[: -len("robots.txt")] + "sitemap.xml"]
            entries: list[dict[str, Any]] = []
            sitemaps: list[str] = []
            errors: list[dict[str, str]] = []
            for target in targets:
                listed = await crawling.read_sitemaps(http, target, max_urls - len(entries))
                entries += listed["urls"]
                sitemaps += listed["sitemaps"]
                errors += listed["errors"]
        if not entries and errors:
            raise ToolError(f"no sitemap could be read: {errors}")
        return table_result(["loc", "lastmod", "changefreq", "priority"],
                            [[e["loc"], e["lastmod"], e["changefreq"], e["priority"]] for e in entries],
                            sitemaps=sitemaps, errors=errors)  # fmt: skip

    @mcp.tool(
        annotations=READ_WEB,
        description="Page metadata of a URL or HTML: title, meta description and other meta tags, canonical URL, "
        "language, OpenGraph (og:*) and Twitter card fields, JSON-LD blocks and the heading outline.",
    )
    async def web_page_metadata(url: OptUrl = "", html: Html = "") -> CallToolResult:
        text, base = await html_of(url, html)
        return json_result({"url": base, **await off_loop(extract.metadata, text, base)})

    @mcp.tool(
        annotations=READ_WEB,
        description="Extract the HTML tables of a URL or HTML as columns + rows of cell text (th header row "
        "detected, colspan repeated, caption kept). Use to read tabular data from a web page.",
    )
    async def web_extract_tables(
        url: OptUrl = "", html: Html = "", max_tables: Annotated[int, Field(ge=1, le=200)] = 20
    ) -> CallToolResult:
        text, _ = await html_of(url, html)
        found = await off_loop(extract.tables, text)
        return json_result({"tables": found[:max_tables], "count": len(found)})

    @mcp.tool(
        annotations=READ_WEB,
        description="Convert a URL's page or given HTML to Markdown (headings, lists, links, tables). main_only "
        "drops navigation, headers, footers and scripts and keeps the main content.",
    )
    async def web_html_to_markdown(
        url: OptUrl = "", html: Html = "", main_only: bool = True,
        max_chars: Annotated[int, Field(ge=100, le=2_000_000)] = 100_000,
    ) -> CallToolResult:  # fmt: skip
        text, base = await html_of(url, html)
        markdown = await off_loop(lambda: extract.to_markdown(text, main_only=main_only))
        return json_result({"url": base, "markdown": markdown[:max_chars], "truncated": len(markdown) > max_chars},
                           text=markdown[:max_chars])  # fmt: skip

    live_tools.register(mcp, store, page_record)
    return mcp


mcp = build(default_dir())
