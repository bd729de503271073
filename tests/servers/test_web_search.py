"""The web-search server through MCP against a loopback site: crawl, index, search, read pages apart."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from servers.web_search.server import build
from tests.servers.conftest import Client, err, ok
from tests.servers.loopback import serve_http
from tests.servers.web_site import PAGES, build_site

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serve_http(build_site()) as url:
        yield url


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    async with Client(build(tmp_path / "index")) as c:
        yield c


async def call(client: Client, tool: str, **args: Any) -> Any:
    return await client.call_tool(tool, args)


async def test_crawl_stays_in_prefix_honours_robots_and_depth(client: Client, site: str) -> None:
    report = ok(await call(client, "web_crawl", start_url=f"{site}/docs/", max_depth=2))
    assert report["prefix"] == f"{site}/docs/"
    assert set(report["indexed"]) == {f"{site}/docs/{p}" for p in ("", "install.html", "usage.html", "deep/1.html",
                                                                   "deep/2.html")}  # fmt: skip
    assert report["skipped"]["robots"] == [f"{site}/docs/private/secret.html"]
    assert f"{site}/blog/post.html" in report["skipped"]["outside prefix"]
    assert "http://other.invalid/elsewhere" in report["skipped"]["outside prefix"]
    assert report["skipped"]["depth limit"] == [f"{site}/docs/deep/3.html"]
    assert report["skipped"]["redirected outside prefix"] == [f"{site}/docs/old.html"]
    stats = ok(await call(client, "web_index_stats"))
    assert stats["pages"] == 5
    assert stats["bytes"] > 0
    assert stats["hosts"][0]["pages"] == 5
    capped = ok(await call(client, "web_crawl", start_url=f"{site}/docs/", max_pages=2, respect_robots=False))
    assert capped["indexedCount"] == 2
    assert "max_pages" in capped["stopped"]


async def test_crawl_seeded_from_the_sitemap(client: Client, site: str) -> None:
    report = ok(await call(client, "web_crawl", start_url=f"{site}/docs/install.html", prefix=f"{site}/docs/",
                           max_depth=0, use_sitemap=True))  # fmt: skip
    assert set(report["indexed"]) == {f"{site}/docs/", f"{site}/docs/install.html", f"{site}/docs/usage.html"}
    assert "outside" in err(await call(client, "web_crawl", start_url=f"{site}/blog/post.html",
                                       prefix=f"{site}/docs/"))  # fmt: skip
    bare = ok(await call(client, "web_crawl", start_url=site, max_depth=0))
    assert bare["prefix"] == f"{site}/"
    assert bare["skipped"]["status 404"] == [f"{site}/"]


async def test_search_ranks_with_bm25_and_reads_cached_pages(client: Client, site: str) -> None:
    ok(await call(client, "web_crawl", start_url=f"{site}/docs/", max_depth=1))
    hits = ok(await call(client, "web_search", query="installing widget"))
    assert hits["rows"][0][0] == f"{site}/docs/install.html"
    assert "**" in hits["rows"][0][3]
    stemmed = ok(await call(client, "web_search", query="installer"))
    assert stemmed["rowCount"] >= 1
    anyword = ok(await call(client, "web_search", query="gizmo installing", mode="any"))
    assert {f"{site}/docs/install.html", f"{site}/docs/usage.html"} <= {r[0] for r in anyword["rows"]}
    assert ok(await call(client, "web_search", query="gizmo installing"))["rowCount"] == 0
    phrase = ok(await call(client, "web_search", query="flux capacitor", mode="phrase"))
    assert [r[0] for r in phrase["rows"]] == [f"{site}/docs/usage.html"]
    fts = ok(await call(client, "web_search", query="title:using AND widg*", mode="fts"))
    assert [r[0] for r in fts["rows"]] == [f"{site}/docs/usage.html"]
    assert ok(await call(client, "web_search", query="widget", url_prefix=f"{site}/docs/usage"))["rowCount"] == 1
    assert "bad search query" in err(await call(client, "web_search", query='"unbalanced', mode="fts"))
    assert "no searchable words" in err(await call(client, "web_search", query="!!!"))
    assert ok(await call(client, "web_search", query="boilerplate footer"))["rowCount"] == 0
    text = ok(await call(client, "web_get_page", url=f"{site}/docs/install.html"))
    assert "Installing the widget takes one command" in text["content"]
    assert "Docs home" not in text["content"]
    markdown = ok(await call(client, "web_get_page", url=f"{site}/docs/install.html#x", format="markdown"))
    assert markdown["content"].startswith("# Install")
    html = ok(await call(client, "web_get_page", url=f"{site}/docs/install.html", format="html", max_chars=100))
    assert html["truncated"]
    assert html["content"].startswith("<!doctype html>")
    assert "not in the index" in err(await call(client, "web_get_page", url=f"{site}/nowhere.html"))


async def test_index_list_and_delete_pages(client: Client, site: str) -> None:
    indexed = ok(await call(client, "web_index_url", url=f"{site}/blog/post.html"))
    assert indexed["title"] == "A blog post"
    assert indexed["words"] >= 5
    ok(await call(client, "web_index_url", url=f"{site}/docs/deep/1.html"))
    ok(await call(client, "web_index_url", url=f"{site}/docs/deep/2.html"))
    listed = ok(await call(client, "web_list_pages", url_prefix=f"{site}/docs/"))
    assert [r[0] for r in listed["rows"]] == [f"{site}/docs/deep/1.html", f"{site}/docs/deep/2.html"]
    assert ok(await call(client, "web_list_pages", limit=1, offset=1))["rowCount"] == 1
    assert ok(await call(client, "web_delete", url=f"{site}/blog/post.html"))["removed"] == 1
    assert ok(await call(client, "web_delete", url_prefix=f"{site}/docs/deep/"))["removed"] == 2
    assert ok(await call(client, "web_index_stats"))["pages"] == 0
    assert ok(await call(client, "web_search", query="chain"))["rowCount"] == 0
    assert "exactly one" in err(await call(client, "web_delete"))
    assert "only HTML" in err(await call(client, "web_index_url", url=f"{site}/docs/data.json"))
    assert "answered 404" in err(await call(client, "web_index_url", url=f"{site}/missing.html"))
    assert "cannot connect" in err(await call(client, "web_index_url", url="http://127.0.0.1:9/"))


async def test_links_robots_and_sitemaps(client: Client, site: str) -> None:
    links = ok(await call(client, "web_extract_links", url=f"{site}/docs/"))
    urls = [r[0] for r in links["rows"]]
    assert f"{site}/docs/usage.html" in urls
    assert "http://other.invalid/elsewhere" in urls
    assert not any(u.startswith("mailto:") for u in urls)
    internal = ok(await call(client, "web_extract_links", url=f"{site}/docs/", internal_only=True))
    assert "http://other.invalid/elsewhere" not in [r[0] for r in internal["rows"]]
    given = ok(await call(client, "web_extract_links", html='<a href="/x">X</a>', url="http://h.test/a/b"))
    assert given["rows"] == [["http://h.test/x", "X", "", True]]
    robots = ok(await call(client, "web_robots", url=f"{site}/docs/",
                           check_urls=[f"{site}/docs/install.html", f"{site}/docs/private/secret.html"]))  # fmt: skip
    assert [c["allowed"] for c in robots["checks"]] == [True, False]
    assert robots["sitemaps"] == [f"{site}/sitemap.xml"]
    sitemap = ok(await call(client, "web_sitemap", url=site))
    locs = {r[0]: r for r in sitemap["rows"]}
    assert set(locs) == {f"{site}/docs/", f"{site}/docs/install.html", f"{site}/docs/usage.html",
                         f"{site}/blog/post.html"}  # fmt: skip
    assert locs[f"{site}/docs/install.html"][1:] == ["2026-11-02", None, "0.6"]
    assert locs[f"{site}/blog/post.html"][2] == "weekly"
    direct = ok(await call(client, "web_sitemap", url=f"{site}/sitemap-docs.xml", max_urls=2))
    assert direct["rowCount"] == 2
    assert "status 404" in err(await call(client, "web_sitemap", url=f"{site}/docs/missing.xml"))
    assert "not valid XML" in err(await call(client, "web_sitemap", url=f"{site}/broken.xml"))


async def test_metadata_tables_and_markdown(client: Client, site: str) -> None:
    meta = ok(await call(client, "web_page_metadata", url=f"{site}/docs/usage.html"))
    assert meta["title"] == "Using the widget"
    assert meta["description"] == "How to use the widget"
    assert meta["openGraph"] == {"title": "Widget usage", "type": "article"}
    assert meta["twitter"] == {"card": "summary"}
    assert meta["canonical"] == f"{site}/docs/usage.html"
    assert meta["lang"] == "en"
    assert meta["jsonLd"] == [{"@type": "TechArticle", "headline": "Usage"}]
    assert meta["headings"] == [{"level": 1, "text": "Usage"}]
    tables = ok(await call(client, "web_extract_tables", url=f"{site}/docs/install.html"))
    assert tables["count"] == 1
    table = tables["tables"][0]
    assert table["caption"] == "Supported platforms"
    assert table["columns"] == ["OS", "Version", "Status"]
    assert table["rows"] == [["Linux", "6.1", "supported"], ["macOS", "not yet", "not yet"]]
    headless = ok(await call(client, "web_extract_tables", html=PAGES["/docs/usage.html"]))
    assert headless["tables"][0]["columns"] == ["col1", "col2"]
    markdown = ok(await call(client, "web_html_to_markdown", url=f"{site}/docs/install.html"))
    assert markdown["markdown"].startswith("# Install")
    assert "## Requirements" in markdown["markdown"]
    assert "| Linux | 6.1 | supported |" in markdown["markdown"]
    assert "Copyright" not in markdown["markdown"]
    full = ok(await call(client, "web_html_to_markdown", url=f"{site}/docs/install.html", main_only=False))
    assert "Copyright boilerplate" in full["markdown"]
    assert "give url or html" in err(await call(client, "web_page_metadata"))
    assert "not an HTML page" in err(await call(client, "web_extract_tables", url=f"{site}/docs/data.json"))
    assert err(await call(client, "web_html_to_markdown", url="not a url"))
