"""Tools over live pages, registered onto the web-search server: header audits, link checks, forms (list and
submit), diffs against the indexed copy, feeds, text search in a page and its images."""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

import anyio
import regex as rx
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.web_search import audit, extract, feeds, forms, linkcheck
from servers.web_search.fetch import Page, get_ok, html_of, off_loop, send, session
from servers.web_search.store import IndexStore

READ_WEB = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)
SUBMIT = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)
INDEXING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=True)

Url = Annotated[str, Field(pattern=r"^https?://\S+$", description="absolute http(s) URL")]
OptUrl = Annotated[str, Field(pattern=r"^(https?://\S+)?$", description="page URL to fetch ('' when html is given)")]
Html = Annotated[str, Field(description="HTML text to read instead of fetching url ('' = fetch url)")]
MaxChars = Annotated[int, Field(ge=100, le=1_000_000, description="cap on the returned text")]
Record = Callable[[Page, str], tuple[dict[str, Any], list[str]]]


EXTRACT_GRACE = 5.0
"""Seconds beyond a search's ``max_seconds`` for extracting the page's text (bounded by the page size cap)."""


def compile_pattern(pattern: str, regex: bool, case_sensitive: bool, whole_word: bool) -> Any:
    """The compiled pattern (the ``regex`` package: same syntax as ``re``, and a match can be given a timeout)."""
    source = pattern if regex else rx.escape(pattern)
    if whole_word:
        source = rf"\b(?:{source})\b"
    try:
        return rx.compile(source, 0 if case_sensitive else rx.IGNORECASE)
    except rx.error as exc:
        raise ToolError(f"bad regular expression {pattern!r}: {exc}") from exc


def register(mcp: MCPServer, store: IndexStore, record_of: Record) -> None:  # noqa: C901 - one function per tool
    """Add the live-page tools to ``mcp``; ``record_of`` turns a fetched page into an index record."""

    @mcp.tool(
        annotations=READ_WEB,
        description="Audit a URL's HTTP response headers: the redirect chain hop by hop, caching (Cache-Control "
        "directives, ETag, Last-Modified, Expires, Vary), cookies with their flags (Secure, HttpOnly, SameSite, "
        "expiry) and security headers (HSTS, CSP, X-Frame-Options, X-Content-Type-Options, Referrer-Policy, "
        "Permissions-Policy, CORS). Returns the headers and findings ranked high/medium/low/info.",
    )
    async def web_headers_audit(url: Url) -> CallToolResult:
        async with session() as http:
            chain, headers = await audit.redirect_chain(http, url)
        report = audit.audit(chain, headers)
        lines = [f"{f['severity']}: {f['message']}" for f in report["findings"]]
        return json_result(report, text=f"{report['finalUrl']} ({report['status']})\n" + "\n".join(lines))

    @mcp.tool(
        annotations=READ_WEB,
        description="Check the links of a page (fetched from url or given as html), or of every indexed page under "
        "url_prefix, and report the broken ones: HTTP 4xx/5xx, timeouts, refused connections, with redirects "
        "followed and counted. Each unique link is checked once (HEAD, GET when HEAD is refused) with bounded "
        "concurrency. Returns one row per link (broken only unless show='all') and counts.",
    )
    async def web_check_links(
        url: OptUrl = "",
        html: Html = "",
        url_prefix: Annotated[
            str,
            Field(
                pattern=r"^(https?://\S+)?$",
                description="check the links of the indexed pages under this prefix instead of one page",
            ),
        ] = "",
        internal_only: Annotated[bool, Field(description="only links to the page's own host")] = False,
        show: Literal["broken", "all"] = "broken",
        max_links: Annotated[int, Field(ge=1, le=2000)] = 200,
        concurrency: Annotated[int, Field(ge=1, le=32)] = 8,
        timeout_seconds: Annotated[float, Field(gt=0, le=60, description="per link")] = 10.0,
        max_seconds: Annotated[float, Field(gt=0, le=600, description="for the whole check")] = 120.0,
    ) -> CallToolResult:
        if url_prefix and (url or html):
            raise ToolError("give url/html (one page) or url_prefix (indexed pages), not both")
        pages: list[tuple[str, str]] = []
        if url_prefix:
            listed = await anyio.to_thread.run_sync(store.list, url_prefix, 1000, 0)
            if not listed:
                raise ToolError(f"no indexed pages under {url_prefix}; crawl or index them first")
            for row in listed:
                stored = await anyio.to_thread.run_sync(store.get, row["url"])
                pages.append((stored["html"] if stored else "", row["url"]))
        else:
            pages.append(await html_of(url, html))
        found_on: dict[str, dict[str, str]] = {}
        for page_html, base in pages:
            for link in await off_loop(extract.links, page_html, base):
                if link["url"] not in found_on and (link["internal"] or not internal_only):
                    found_on[link["url"]] = {"page": base, "text": link["text"]}
        targets = list(found_on)[:max_links]
        limits = linkcheck.CheckLimits(concurrency, timeout_seconds, max_seconds)
        async with session(timeout_seconds) as http:
            results, finished = await linkcheck.check_all(http, targets, limits)
        rows = [[r["url"], r["status"], r["ok"], r["finalUrl"], r["redirects"], r["error"],
                 found_on[r["url"]]["page"], found_on[r["url"]]["text"]]
                for r in results if show == "all" or not r["ok"]]  # fmt: skip
        return table_result(["url", "status", "ok", "final_url", "redirects", "error", "found_on", "text"], rows,
                            summary=linkcheck.summary(results), pages=len(pages), links=len(found_on),
                            skipped=max(0, len(found_on) - max_links), finished=finished)  # fmt: skip

    @mcp.tool(
        annotations=READ_WEB,
        description="List the HTML forms of a page (URL or html): index, id, name, resolved action URL, method, "
        "enctype and every field with name, type, current value, required/disabled, label and the options of "
        "selects and radio groups. Use before web_submit_form to see what a form expects.",
    )
    async def web_forms(url: OptUrl = "", html: Html = "") -> CallToolResult:
        text, base = await html_of(url, html)
        found = await off_loop(forms.parse_forms, text, base)
        return json_result({"url": base, "count": len(found), "forms": [f.summary() for f in found]})

    @mcp.tool(
        annotations=SUBMIT,
        description="Fill and submit a form of a page like a browser: pick it by index, id or name, keep its "
        "default values (hidden fields, checked boxes, selected options), replace the fields given in values, "
        "and send it with its method (GET query or POST urlencoded/multipart). Returns the status, final URL, "
        "what was sent, and the response's title and main text. Submitting may change data on the site.",
    )
    async def web_submit_form(
        url: Annotated[str, Field(pattern=r"^https?://\S+$", description="the page holding the form")],
        form: Annotated[str, Field(description="form index, id or name ('' = the first form)")] = "",
        values: Annotated[dict[str, str | list[str]] | None, Field(description="field name -> value (a list "
                                                                   "for multi-selects and checkbox groups, [] "
                                                                   "unchecks or deselects)")] = None,
        submit: Annotated[str, Field(description="name of the submit button to press ('' = none)")] = "",
        html: Annotated[str, Field(description="the page's HTML instead of fetching url ('' = fetch)")] = "",
        max_chars: MaxChars = 20_000,
    ) -> CallToolResult:  # fmt: skip
        text, base = await html_of(url, html)
        chosen = forms.pick(await off_loop(forms.parse_forms, text, base), form)
        pairs = forms.data_set(chosen, values or {}, submit)
        async with session() as http:
            if chosen.method == "GET":
                target = forms.get_url(chosen.action, pairs)
                page = await send(http, "GET", target)
            elif "multipart" in chosen.enctype:
                page = await send(http, "POST", chosen.action, files=[(k, (None, v)) for k, v in pairs])
            else:
                page = await send(http, "POST", chosen.action, content=urlencode(pairs).encode(),
                                  headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
        body = page.text()
        title = ""
        if page.is_html:
            meta = await off_loop(extract.metadata, body, page.url)
            title, body = meta["title"], await off_loop(extract.main_text, body)
        return json_result({"form": chosen.index, "method": chosen.method, "action": chosen.action,
                            "sent": [list(p) for p in pairs], "status": page.status, "finalUrl": page.url,
                            "contentType": page.content_type, "title": title, "text": body[:max_chars],
                            "truncated": len(body) > max_chars}, text=body[:max_chars])  # fmt: skip

    @mcp.tool(
        annotations=INDEXING,
        description="Fetch an indexed page again and diff its main text against the copy in the local index: "
        "changed or unchanged, lines added and removed, title change, and a unified diff. refresh=true then "
        "stores the new version in the index. Use to watch a page for changes.",
    )
    async def web_page_diff(
        url: Url,
        refresh: Annotated[bool, Field(description="replace the indexed copy with the live page")] = False,
        context_lines: Annotated[int, Field(ge=0, le=20)] = 3,
        max_chars: MaxChars = 50_000,
    ) -> CallToolResult:
        stored = await anyio.to_thread.run_sync(store.get, extract.normalize(url))
        if stored is None:
            raise ToolError(f"{url} is not in the index; add it with web_index_url first")
        async with session() as http:
            page = await get_ok(http, url)
        if not page.is_html:
            raise ToolError(f"{url} is now {page.content_type or 'not HTML'}, not an HTML page")
        record, _ = await off_loop(record_of, page, page.text())
        old, new = (stored["text"] or "").splitlines(), record["text"].splitlines()
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stored["fetched_at"]))
        diff = list(difflib.unified_diff(old, new, f"indexed {when}", "live", n=context_lines, lineterm=""))
        added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
        removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
        if refresh:
            await anyio.to_thread.run_sync(store.upsert, record)
        text = "\n".join(diff)
        return json_result({"url": stored["url"], "changed": bool(diff) or stored["title"] != record["title"],
                            "added": added, "removed": removed, "indexedAt": when,
                            "title": {"indexed": stored["title"], "live": record["title"]},
                            "diff": text[:max_chars], "truncated": len(text) > max_chars, "refreshed": refresh},
                           text=text[:max_chars] or "unchanged")  # fmt: skip

    @mcp.tool(
        annotations=READ_WEB,
        description="Read an RSS 2.0, RSS 1.0 or Atom feed: the feed's title, link, description and update time, "
        "and its entries (title, link, id, published/updated as ISO 8601, author, plain-text summary, "
        "categories), in the feed's order. Also reads JSON Feed. Given an HTML page it follows the feed the page "
        "announces (<link rel=alternate>). Use to follow news, blogs and release notes.",
    )
    async def web_feed(
        url: Annotated[str, Field(pattern=r"^(https?://\S+)?$", description="feed or page URL ('' when content "
                                  "is given)")] = "",
        content: Annotated[str, Field(description="the feed's text (XML or JSON) instead of fetching url")] = "",
        max_entries: Annotated[int, Field(ge=1, le=1000)] = 50,
    ) -> CallToolResult:  # fmt: skip
        discovered: list[dict[str, str]] = []
        if content:
            body, base = content.encode(), url or "http://localhost/"
        elif not url:
            raise ToolError("give url or content")
        else:
            async with session() as http:
                page = await get_ok(http, url)
                if "html" in page.content_type and page.body.lstrip()[:5] not in (b"<?xml", b"<rss ", b"<feed"):
                    discovered = await off_loop(feeds.discover, page.text(), page.url)
                    if not discovered:
                        raise ToolError(f"{url} is an HTML page that announces no feed (<link rel=alternate>)")
                    page = await get_ok(http, discovered[0]["url"])
            body, base = page.body, page.url
        feed = await off_loop(feeds.parse_feed, body, base)
        entries = feed.pop("entries")
        return table_result(["title", "link", "published", "updated", "author", "summary", "categories", "id"],
                            [[e[c] for c in ("title", "link", "published", "updated", "author", "summary",
                                             "categories", "id")] for e in entries[:max_entries]],
                            title=feed["title"], feed={**feed, "url": base}, discovered=discovered,
                            total=len(entries))  # fmt: skip

    @mcp.tool(
        annotations=READ_WEB,
        description="Find a word, phrase or regular expression in a live page's text (URL or html) and return "
        "each match with its line number and the surrounding text. scope 'main' searches the main content, "
        "'page' all visible text. Use to locate a statement, price, version or name on a page.",
    )
    async def web_find_text(
        pattern: Annotated[str, Field(min_length=1, max_length=1000, description="the text (or regex) to find")],
        url: OptUrl = "",
        html: Html = "",
        regex: Annotated[bool, Field(description="pattern is a Python regular expression")] = False,
        case_sensitive: bool = False,
        whole_word: bool = False,
        scope: Literal["main", "page"] = "main",
        context_chars: Annotated[int, Field(ge=0, le=500)] = 80,
        max_matches: Annotated[int, Field(ge=1, le=1000)] = 50,
        max_seconds: Annotated[float, Field(gt=0, le=60, description="time limit of the search")] = 10.0,
    ) -> CallToolResult:
        compiled = compile_pattern(pattern, regex, case_sensitive, whole_word)
        text, base = await html_of(url, html)

        def search() -> tuple[list[dict[str, Any]], int]:
            body = (extract.main_text(text) if scope == "main"
                    else extract.clean_text(extract.soup_of(text).get_text("\n")))  # fmt: skip
            return extract.find_text(body, compiled, context_chars, max_matches, timeout=max_seconds)

        try:  # the match itself stops at max_seconds (a regex holds the GIL, so no outer timer could preempt it)
            with anyio.fail_after(max_seconds + EXTRACT_GRACE):
                matches, total = await anyio.to_thread.run_sync(search, abandon_on_cancel=True)
        except TimeoutError as exc:
            raise ToolError(
                f"the search took longer than {max_seconds} s; simplify the pattern (alternatives that overlap "
                "under repetition, like (a|aa)+, backtrack exponentially)"
            ) from exc
        return table_result(["line", "match", "before", "after"],
                            [[m["line"], m["match"], m["before"], m["after"]] for m in matches],
                            url=base, total=total, truncated=total > len(matches))  # fmt: skip

    @mcp.tool(
        annotations=READ_WEB,
        description="List the images of a page (URL or html): absolute src, alt text, width/height, lazy loading "
        "and srcset candidates, with counts of images lacking alt text (an accessibility finding; alt='' marks "
        "a decorative image). Use to collect image URLs or audit alt text.",
    )
    async def web_extract_images(url: OptUrl = "", html: Html = "") -> CallToolResult:
        text, base = await html_of(url, html)
        found = await off_loop(extract.images, text, base)
        return table_result(["src", "alt", "width", "height", "loading", "srcset"],
                            [[i["src"], i["alt"], i["width"], i["height"], i["loading"], i["srcset"]] for i in found],
                            url=base, missingAlt=sum(i["alt"] is None for i in found),
                            decorative=sum(i["alt"] == "" for i in found),
                            lazy=sum(i["loading"] == "lazy" for i in found))  # fmt: skip
