"""The web-search server's live-page tools through MCP against the loopback site: header audits, link checks, forms,
page diffs, feeds, text search and images."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from servers.web_search.server import build
from tests.servers import web_site
from tests.servers.conftest import Client, err, ok
from tests.servers.loopback import serve_http

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serve_http(web_site.build_site()) as url:
        yield url


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    async with Client(build(tmp_path / "index")) as c:
        yield c


async def call(client: Client, tool: str, **args: Any) -> Any:
    return await client.call_tool(tool, args)


def topics(report: dict[str, Any], severity: str) -> list[str]:
    return sorted(f["topic"] for f in report["findings"] if f["severity"] == severity)


async def test_headers_audit_reports_chain_cookies_and_security_headers(client: Client, site: str) -> None:
    good = ok(await call(client, "web_headers_audit", url=f"{site}/headers/secure"))
    assert good["status"] == 200
    assert good["security"]["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"
    assert good["cookies"] == [{"name": "session", "secure": True, "httpOnly": True, "sameSite": "strict",
                                "path": "/", "domain": None, "expires": None, "maxAge": None}]  # fmt: skip
    assert good["caching"]["cacheControl"] == {"private": True, "max-age": "60"}
    assert good["caching"]["cacheable"] is False
    assert good["counts"] == {"high": 0, "medium": 1, "low": 0, "info": 0}
    assert topics(good, "medium") == ["transport"]
    weak = ok(await call(client, "web_headers_audit", url=f"{site}/headers/hop1"))
    assert [(h["url"], h["status"]) for h in weak["redirects"]] == [
        (f"{site}/headers/hop1", 302), (f"{site}/headers/hop2", 301), (f"{site}/headers/weak", 200)]  # fmt: skip
    assert weak["finalUrl"] == f"{site}/headers/weak"
    assert topics(weak, "high") == ["cookies", "cors"]
    assert topics(weak, "medium") == ["caching", "referrer-policy", "transport", "x-frame-options"]
    assert {"content-security-policy", "x-content-type-options", "server", "x-powered-by"} <= set(topics(weak, "low"))
    assert any("'prefs' has no SameSite" in f["message"] for f in weak["findings"])
    assert [c["name"] for c in weak["cookies"]] == ["tracker", "prefs"]
    assert weak["cookies"][1]["maxAge"] == "600"
    assert "redirect loop" in err(await call(client, "web_headers_audit", url=f"{site}/headers/loop"))
    assert "ConnectError" in err(await call(client, "web_headers_audit", url="http://127.0.0.1:1/"))
    assert err(await call(client, "web_headers_audit", url="ftp://example/"))


async def test_check_links_reports_broken_links_of_a_page_and_of_the_index(client: Client, site: str) -> None:
    report = ok(await call(client, "web_check_links", url=f"{site}/links.html", timeout_seconds=0.5, show="all"))
    rows = {r[0]: dict(zip(report["columns"], r, strict=True)) for r in report["rows"]}
    assert report["links"] == 9
    assert rows[f"{site}/docs/install.html"]["status"] == 200
    assert rows[f"{site}/docs/missing.html"]["status"] == 404
    assert rows[f"{site}/status/500"]["ok"] is False
    moved = rows[f"{site}/docs/old.html"]
    assert (moved["ok"], moved["redirects"], moved["final_url"]) == (True, 1, f"{site}/blog/post.html")
    assert rows[f"{site}/head-refused"]["status"] == 200
    assert rows[f"{site}/slow"]["error"] == "timeout after 0.5 s"
    assert rows["http://127.0.0.1:1/closed"]["error"].startswith("cannot connect")
    assert report["summary"]["broken"] == 4
    assert report["summary"]["timeouts"] == 1
    assert report["summary"]["byStatus"]["error"] == 2
    assert report["finished"] is True
    hurried = ok(await call(client, "web_check_links", url=f"{site}/links.html", max_seconds=0.3, show="all"))
    assert hurried["finished"] is False
    assert f"{site}/slow" not in {r[0] for r in hurried["rows"]}
    assert f"{site}/docs/install.html" in {r[0] for r in hurried["rows"]}
    broken = ok(await call(client, "web_check_links", url=f"{site}/links.html", timeout_seconds=0.5,
                           internal_only=True, concurrency=2))  # fmt: skip
    assert sorted(r[0] for r in broken["rows"]) == [f"{site}/docs/missing.html", f"{site}/slow", f"{site}/status/500"]
    assert broken["links"] == 8
    capped = ok(await call(client, "web_check_links", url=f"{site}/links.html", max_links=2, show="all"))
    assert (capped["rowCount"], capped["skipped"]) == (2, 7)
    for page in ("install.html", "usage.html"):
        ok(await call(client, "web_index_url", url=f"{site}/docs/{page}"))
    indexed = ok(await call(client, "web_check_links", url_prefix=f"{site}/docs/", internal_only=True, show="all"))
    assert indexed["pages"] == 2
    assert indexed["summary"] == {"checked": 3, "ok": 3, "broken": 0, "redirected": 0, "timeouts": 0,
                                  "byStatus": {"200": 3}}  # fmt: skip
    assert "no indexed pages" in err(await call(client, "web_check_links", url_prefix=f"{site}/nothing/"))
    assert "not both" in err(await call(client, "web_check_links", url=f"{site}/links.html", url_prefix=site))
    assert err(await call(client, "web_check_links", url=f"{site}/links.html", concurrency=0))


async def test_forms_are_listed_with_fields(client: Client, site: str) -> None:
    listed = ok(await call(client, "web_forms", url=f"{site}/forms.html"))
    assert listed["count"] == 3
    search, contact, upload = listed["forms"]
    assert (search["id"], search["method"], search["action"]) == ("search", "GET", f"{site}/forms/echo")
    fields = {f["name"]: f for f in search["fields"]}
    assert list(fields) == ["token", "q", "lang", "exact", "fresh", "", "outside"]
    assert (fields["q"]["label"], fields["q"]["placeholder"]) == ("Query", "words")
    assert fields["lang"]["value"] == "fr"
    assert [o["value"] for o in fields["lang"]["options"]] == ["en", "fr"]
    assert (fields["exact"]["checked"], fields["fresh"]["checked"]) == (False, True)
    assert (contact["name"], contact["method"], contact["action"]) == ("contact", "POST", f"{site}/forms/echo")
    cfields = {f["name"]: f for f in contact["fields"]}
    assert cfields["email"]["required"] is True
    assert cfields["message"]["value"] == "Hello"
    assert cfields["topic"]["value"] == "support"
    assert [(o["value"], o["label"]) for o in cfields["topic"]["options"]] == [
        ("sales", "Sales"),
        ("support", "Support"),
    ]
    assert cfields["tags"]["value"] == ["b"]
    assert cfields["legacy"]["disabled"] is True
    assert upload["enctype"] == "multipart/form-data"
    assert ok(await call(client, "web_forms", html="<p>no forms</p>"))["count"] == 0
    assert "give url or html" in err(await call(client, "web_forms"))


async def test_submit_form_sends_defaults_and_values(client: Client, site: str) -> None:
    got = ok(await call(client, "web_submit_form", url=f"{site}/forms.html", form="search", values={"q": "widget"}))
    assert got["method"] == "GET"
    assert got["sent"] == [["token", "t0k"], ["q", "widget"], ["lang", "fr"], ["fresh", "1"], ["outside", "linked"]]
    assert got["finalUrl"].startswith(f"{site}/forms/echo?token=t0k&q=widget")
    assert got["title"] == "Echo"
    assert "method GET" in got["text"]
    assert "q=widget" in got["text"]
    assert "exact=" not in got["text"]
    unchecked = ok(
        await call(client, "web_submit_form", url=f"{site}/forms.html", values={"fresh": [], "exact": "yes"})
    )
    assert [p[0] for p in unchecked["sent"]] == ["token", "q", "lang", "exact", "outside"]
    posted = ok(await call(client, "web_submit_form", url=f"{site}/forms.html", form="contact", submit="action",
                           values={"email": "a@b.c", "topic": "sales", "tags": ["a", "c"]}))  # fmt: skip
    assert "method POST type application/x-www-form-urlencoded" in posted["text"]
    assert posted["sent"] == [["email", "a@b.c"], ["message", "Hello"], ["topic", "sales"], ["tags", "a"],
                              ["tags", "c"], ["action", "send"]]  # fmt: skip
    for field in ("email=a@b.c", "topic=sales", "tags=c", "action=send"):
        assert field in posted["text"]
    assert "legacy" not in posted["text"]
    assert "preview" not in posted["text"]
    multipart = ok(await call(client, "web_submit_form", url=f"{site}/forms.html", form="2", values={"title": "q3"}))
    assert "method POST type multipart/form-data" in multipart["text"]
    assert "attachment" not in multipart["text"]
    assert "file field" in err(await call(client, "web_submit_form", url=f"{site}/forms.html", form="upload",
                                          values={"attachment": "x"}))  # fmt: skip
    assert "title=q3" in multipart["text"]
    assert "required field(s) email" in err(await call(client, "web_submit_form", url=f"{site}/forms.html",
                                                        form="contact"))  # fmt: skip
    assert "has no field nope" in err(await call(client, "web_submit_form", url=f"{site}/forms.html",
                                                 values={"nope": "x"}))  # fmt: skip
    assert "no form '9'" in err(await call(client, "web_submit_form", url=f"{site}/forms.html", form="9"))
    assert "no submit button" in err(await call(client, "web_submit_form", url=f"{site}/forms.html", submit="go"))
    assert "has no <form>" in err(await call(client, "web_submit_form", url=f"{site}/docs/install.html"))


async def test_page_diff_against_the_indexed_copy(client: Client, site: str) -> None:
    url = f"{site}/changing.html"
    assert "not in the index" in err(await call(client, "web_page_diff", url=url))
    ok(await call(client, "web_index_url", url=url))
    same = ok(await call(client, "web_page_diff", url=url))
    assert (same["changed"], same["diff"]) == (False, "")
    original = web_site.CHANGING["text"]
    web_site.CHANGING["text"] = original.replace("10 euros", "12 euros")
    try:
        changed = ok(await call(client, "web_page_diff", url=url, context_lines=0))
        assert (changed["changed"], changed["added"], changed["removed"]) == (True, 1, 1)
        assert "-The price is 10 euros." in changed["diff"]
        assert "+The price is 12 euros." in changed["diff"]
        assert "Opening hours" not in changed["diff"]
        assert ok(await call(client, "web_page_diff", url=url))["changed"] is True
        assert ok(await call(client, "web_page_diff", url=url, refresh=True))["refreshed"] is True
        assert ok(await call(client, "web_page_diff", url=url))["changed"] is False
        assert "12 euros" in ok(await call(client, "web_get_page", url=url))["content"]
    finally:
        web_site.CHANGING["text"] = original
    assert err(await call(client, "web_page_diff", url=url, context_lines=99))


async def test_feeds_rss_atom_rdf_and_discovery(client: Client, site: str) -> None:
    rss = ok(await call(client, "web_feed", url=f"{site}/feeds/rss.xml"))
    assert (rss["feed"]["format"], rss["feed"]["title"], rss["total"]) == ("rss2", "Widget news", 2)
    assert rss["feed"]["description"] == "Releases & news"
    assert rss["feed"]["updated"] == "2026-11-30T10:00:00+00:00"
    first = dict(zip(rss["columns"], rss["rows"][0], strict=True))
    assert first == {"title": "Widget 2.0 released", "link": f"{site}/blog/2-0.html",
                     "published": "2026-11-30T09:00:00+00:00", "updated": None, "author": "Ada",
                     "summary": "The new widget is here.", "categories": ["release"], "id": "w-2.0"}  # fmt: skip
    atom = ok(await call(client, "web_feed", url=f"{site}/feeds/atom.xml"))
    entry = dict(zip(atom["columns"], atom["rows"][0], strict=True))
    assert atom["feed"]["format"] == "atom"
    assert (entry["link"], entry["author"], entry["categories"]) == (f"{site}/changes/1", "Grace", ["performance"])
    assert (entry["published"], entry["updated"]) == ("2026-11-28T08:00:00+00:00", "2026-11-29T08:00:00+00:00")
    rdf = ok(await call(client, "web_feed", url=f"{site}/feeds/rdf.xml"))
    assert (rdf["feed"]["format"], rdf["rows"][0][0], rdf["rows"][0][2]) == ("rss1", "Item A",
                                                                             "2026-10-01T12:00:00+00:00")  # fmt: skip
    found = ok(await call(client, "web_feed", url=f"{site}/blog/", max_entries=1))
    assert found["discovered"] == [{"url": f"{site}/feeds/rss.xml", "type": "application/rss+xml",
                                    "title": "Widget news"}]  # fmt: skip
    assert (found["rowCount"], found["total"]) == (1, 2)
    assert ok(await call(client, "web_feed", url=f"{site}/feeds/mislabelled"))["total"] == 2
    jsonfeed = ok(await call(client, "web_feed", url=f"{site}/feeds/feed.json"))
    assert jsonfeed["feed"]["format"] == "json"
    assert dict(zip(jsonfeed["columns"], jsonfeed["rows"][0], strict=True)) == {
        "title": "Seven", "link": f"{site}/posts/7", "published": "2026-11-07T07:00:00+00:00", "updated": None,
        "author": "Lin", "summary": "Lucky seven", "categories": ["numbers"], "id": "7"}  # fmt: skip
    assert "not a JSON Feed" in err(await call(client, "web_feed", content='{"items": []}'))
    inline = ok(await call(client, "web_feed", content=web_site.ATOM))
    assert inline["rows"][0][0] == "Faster start"
    assert "not valid XML" in err(await call(client, "web_feed", url=f"{site}/feeds/bad.xml"))
    assert "not an RSS or Atom feed" in err(await call(client, "web_feed", url=f"{site}/feeds/notfeed.xml"))
    assert "announces no feed" in err(await call(client, "web_feed", url=f"{site}/docs/install.html"))
    assert "give url or content" in err(await call(client, "web_feed"))


async def test_find_text_in_a_page(client: Client, site: str) -> None:
    url = f"{site}/docs/install.html"
    main = ok(await call(client, "web_find_text", url=url, pattern="widget"))
    assert main["total"] == 1
    assert ok(await call(client, "web_find_text", url=url, pattern="widget", scope="page"))["total"] == 2
    assert ok(await call(client, "web_find_text", url=url, pattern="install"))["total"] == 3
    assert ok(await call(client, "web_find_text", url=url, pattern="install", case_sensitive=True))["total"] == 1
    word = ok(await call(client, "web_find_text", url=url, pattern="install", whole_word=True))
    assert [r[1] for r in word["rows"]] == ["Install"]
    assert word["rows"][0][0] == 1
    version = ok(await call(client, "web_find_text", url=url, pattern=r"\d+\.\d+", regex=True))
    assert [r[1] for r in version["rows"]] == ["6.1"]
    context = ok(await call(client, "web_find_text", url=url, pattern="one command", context_chars=12))
    line, match, before, after = context["rows"][0]
    assert (line, match, before, after) == (2, "one command", "idget takes ", " with pip. T")
    capped = ok(await call(client, "web_find_text", html="<p>a b a a</p>", pattern="a", whole_word=True,
                           max_matches=2))  # fmt: skip
    assert (capped["rowCount"], capped["total"], capped["truncated"]) == (2, 3, True)
    # Overlapping alternatives under repetition backtrack exponentially; the match is stopped at max_seconds.
    slow = await call(client, "web_find_text", html=f"<p>{'a' * 40}!</p>", pattern="(a|aa)+$", regex=True,
                      max_seconds=0.1)  # fmt: skip
    assert "longer than 0.1 s" in err(slow)
    assert "bad regular expression" in err(await call(client, "web_find_text", url=url, pattern="(", regex=True))
    assert err(await call(client, "web_find_text", url=url, pattern=""))


async def test_extract_images_with_alt_text_counts(client: Client, site: str) -> None:
    found = ok(await call(client, "web_extract_images", url=f"{site}/gallery.html"))
    assert found["rows"] == [
        [f"{site}/img/a.png", "The widget on a desk", "640", "480", None, []],
        [f"{site}/img/b.png", "", None, None, "lazy", [f"{site}/img/b-2x.png", f"{site}/img/b-3x.png"]],
        [f"{site}/img/c.png", None, None, None, None, []],
    ]
    assert (found["missingAlt"], found["decorative"], found["lazy"]) == (1, 1, 1)
    assert ok(await call(client, "web_extract_images", html="<p>none</p>"))["rowCount"] == 0
    assert "not an HTML page" in err(await call(client, "web_extract_images", url=f"{site}/docs/data.json"))
