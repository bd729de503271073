"""A small loopback web site for the web-search tests: docs pages with links, boilerplate, tables and metadata,
a robots.txt with a disallowed folder and a sitemap index, pages outside the crawl prefix, and a JSON file; for the
live-page tools also forms with an echo endpoint, RSS/Atom/RDF feeds, good and weak response headers with redirect
chains, a page of good and broken links, a page whose text the test changes (``CHANGING``) and a gallery."""

from __future__ import annotations

import gzip
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

CHROME = '<nav><a href="/docs/">Docs home</a> <a href="/blog/post.html">Blog</a></nav>'
FOOTER = "<footer>Copyright boilerplate footer text</footer>"


def page(title: str, body: str, head: str = "") -> str:
    return (f"<!doctype html><html lang='en'><head><title>{title}</title>{head}</head><body>{CHROME}"
            f"<main>{body}</main>{FOOTER}</body></html>")  # fmt: skip


PAGES = {
    "/docs/": page("Widget docs", """
        <h1>Widget documentation</h1><p>Welcome to the widget manual. Start with the guides below.</p>
        <ul><li><a href="install.html">Install</a></li><li><a href="usage.html#top">Usage</a></li>
        <li><a href="private/secret.html">Secret</a></li><li><a href="deep/1.html">Deep</a></li>
        <li><a href="http://other.invalid/elsewhere">Elsewhere</a></li>
        <li><a href="mailto:a@b.c">Mail</a></li><li><a href="old.html">Old</a></li></ul>"""),
    "/docs/install.html": page("Installing the widget", """
        <h1>Install</h1><p>Installing the widget takes one command with pip. The installer checks your
        platform and downloads nothing else.</p><h2>Requirements</h2>
        <table><caption>Supported platforms</caption><tr><th>OS</th><th>Version</th><th>Status</th></tr>
        <tr><td>Linux</td><td>6.1</td><td>supported</td></tr><tr><td>macOS</td><td colspan="2">not yet</td></tr>
        </table><p>See <a href="usage.html">usage</a>.</p>"""),
    "/docs/usage.html": page("Using the widget", """
        <h1>Usage</h1><p>Configure the gizmo flux capacitor before calling the widget from your code.</p>
        <table><tr><td>a</td><td>1</td></tr><tr><td>b</td><td>2</td></tr></table>""", head="""
        <meta name="description" content="How to use the widget">
        <meta property="og:title" content="Widget usage"><meta property="og:type" content="article">
        <meta name="twitter:card" content="summary"><link rel="canonical" href="/docs/usage.html">
        <script type="application/ld+json">{"@type": "TechArticle", "headline": "Usage"}</script>"""),
    "/docs/private/secret.html": page("Secret", "<p>Robots must not see this confidential page.</p>"),
    "/docs/deep/1.html": page("Deep one", '<p>Level one of the chain.</p><a href="2.html">next</a>'),
    "/docs/deep/2.html": page("Deep two", '<p>Level two of the chain.</p><a href="3.html">next</a>'),
    "/docs/deep/3.html": page("Deep three", "<p>Level three is beyond the depth limit.</p>"),
    "/blog/post.html": page("A blog post", "<p>Outside the docs prefix, about widgets too.</p>"),
}  # fmt: skip

CHANGING = {"text": "<p>The price is 10 euros.</p><p>Opening hours stay the same.</p>"}
FORMS = page(
    "Forms",
    """
    <h1>Forms</h1>
    <form id="search" action="/forms/echo" method="get"><input type="hidden" name="token" value="t0k">
      <label for="q">Query</label><input id="q" name="q" placeholder="words">
      <select name="lang"><option value="en">English</option><option value="fr" selected>French</option></select>
      <label><input type="checkbox" name="exact" value="yes"> Exact</label>
      <label><input type="checkbox" name="fresh" value="1" checked> Fresh</label>
      <input type="submit" value="Search"></form>
    <form name="contact" action="forms/echo" method="POST"><input type="email" name="email" required>
      <textarea name="message">Hello</textarea>
      <input type="radio" name="topic" value="sales" id="t1"><label for="t1">Sales</label>
      <input type="radio" name="topic" value="support" id="t2" checked><label for="t2">Support</label>
      <select name="tags" multiple><option>a</option><option selected>b</option><option>c</option></select>
      <input name="legacy" value="x" disabled>
      <button type="submit" name="action" value="send">Send</button>
      <button type="submit" name="action2" value="preview">Preview</button></form>
    <form id="upload" action="/forms/echo" method="post" enctype="multipart/form-data">
      <input name="title" value="report"><input type="file" name="attachment"></form>
    <input form="search" name="outside" value="linked">""",
)
LINKS = page(
    "Links",
    """
    <h1>Links to check</h1><a href="/docs/install.html">good</a> <a href="/docs/missing.html">missing</a>
    <a href="/status/500">server error</a> <a href="/docs/old.html">moved</a> <a href="/head-refused">no head</a>
    <a href="/slow">slow</a> <a href="http://127.0.0.1:1/closed">closed port</a>
    <a href="/docs/install.html#requirements">good again</a>""",
)
GALLERY = page(
    "Gallery",
    """<h1>Gallery</h1><p>Three pictures of the widget in use.</p>
    <img src="/img/a.png" alt="The widget on a desk" width="640" height="480">
    <img src="img/b.png" alt="" loading="lazy" srcset="img/b-2x.png 2x, /img/b-3x.png 3x">
    <img data-src="/img/c.png">""",
)
BLOG = page(
    "Blog",
    "<h1>Blog</h1><p>News about the widget.</p>",
    head="""
    <link rel="alternate" type="application/rss+xml" title="Widget news" href="/feeds/rss.xml">""",
)
RSS = """<?xml version="1.0"?><rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel>
<title>Widget news</title><link>http://widget.example/blog/</link><description>Releases &amp; news</description>
<lastBuildDate>Mon, 30 Nov 2026 10:00:00 GMT</lastBuildDate>
<item><title>Widget 2.0 released</title><link>/blog/2-0.html</link><guid>w-2.0</guid>
<pubDate>Mon, 30 Nov 2026 09:00:00 GMT</pubDate><dc:creator>Ada</dc:creator><category>release</category>
<description>&lt;p&gt;The &lt;b&gt;new&lt;/b&gt; widget is here.&lt;/p&gt;</description></item>
<item><title>Widget 1.9</title><link>/blog/1-9.html</link><pubDate>Sun, 01 Nov 2026 09:00:00 GMT</pubDate>
<description>Bug fixes.</description></item></channel></rss>"""
ATOM = """<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>Widget changes</title>
<subtitle>Every change</subtitle><link href="http://widget.example/changes/"/><updated>2026-11-30T10:00:00Z</updated>
<entry><title>Faster start</title><link rel="alternate" href="/changes/1"/><id>urn:change:1</id>
<updated>2026-11-29T08:00:00Z</updated><published>2026-11-28T08:00:00Z</published><author><name>Grace</name></author>
<category term="performance"/><summary>Startup is twice as fast.</summary></entry></feed>"""
RDF = """<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel rdf:about="http://widget.example/"><title>Widget RDF</title><link>http://widget.example/</link>
<description>Old style</description></channel>
<item rdf:about="http://widget.example/a"><title>Item A</title><link>http://widget.example/a</link>
<dc:date>2026-10-01T12:00:00Z</dc:date><description>First</description></item></rdf:RDF>"""
JSON_FEED = """{"version": "https://jsonfeed.org/version/1.1", "title": "Widget JSON", "items": [
 {"id": 7, "url": "/posts/7", "title": "Seven", "content_html": "<p>Lucky <i>seven</i></p>",
  "date_published": "2026-11-07T07:00:00Z", "authors": [{"name": "Lin"}], "tags": ["numbers"]}]}"""
SECURE_HEADERS = {
    "Strict-Transport-Security": "max-age=63072000; includeSubDomains",
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'", "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin", "Permissions-Policy": "camera=()",
    "Cache-Control": "private, max-age=60", "ETag": '"v1"',
}  # fmt: skip
WEAK_HEADERS = {
    "Server": "nginx/1.2.3", "X-Powered-By": "PHP/8.1.2", "Cache-Control": "public, max-age=3600",
    "Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": "true",
    "Content-Security-Policy": "script-src 'self' 'unsafe-inline'", "Referrer-Policy": "unsafe-url",
}  # fmt: skip


def header_routes() -> list[Route]:
    async def secure(_request: Request) -> Response:
        response = HTMLResponse(page("Secure", "<p>ok</p>"), headers=SECURE_HEADERS)
        response.set_cookie("session", "s3cr3t", httponly=True, secure=True, samesite="strict")
        return response

    async def weak(_request: Request) -> Response:
        response = HTMLResponse(page("Weak", "<p>ok</p>"), headers=WEAK_HEADERS)
        response.raw_headers.append((b"set-cookie", b"tracker=1; SameSite=None"))
        response.raw_headers.append((b"set-cookie", b"prefs=dark; Path=/; Max-Age=600"))
        return response

    return [Route("/headers/secure", secure), Route("/headers/weak", weak),
            Route("/headers/hop1", lambda _r: RedirectResponse("/headers/hop2", 302)),
            Route("/headers/hop2", lambda _r: RedirectResponse("/headers/weak", 301)),
            Route("/headers/loop", lambda _r: RedirectResponse("/headers/loop", 302))]  # fmt: skip


def live_routes() -> list[Route]:
    async def echo(request: Request) -> Response:
        fields: list[tuple[str, Any]] = list(request.query_params.multi_items())
        if request.method == "POST":
            fields += [
                (k, v if isinstance(v, str) else f"file:{v.filename}") for k, v in (await request.form()).multi_items()
            ]
        items = "".join(f"<li>{k}={v}</li>" for k, v in fields)
        kind = request.headers.get("content-type", "none").split(";")[0]
        return HTMLResponse(page("Echo", f"<h1>Echo</h1><p>method {request.method} type {kind}</p><ul>{items}</ul>"))

    async def head_refused(request: Request) -> Response:
        return Response(status_code=405) if request.method == "HEAD" else HTMLResponse(page("No head", "<p>ok</p>"))

    async def slow(_request: Request) -> Response:
        await anyio.sleep(2)
        return HTMLResponse(page("Slow", "<p>late</p>"))

    def xml(body: str, kind: str) -> Any:
        return lambda _r: Response(body, media_type=kind)

    return [Route("/forms/echo", echo, methods=["GET", "POST"]), Route("/head-refused", head_refused),
            Route("/slow", slow), Route("/status/500", lambda _r: PlainTextResponse("boom", 500)),
            Route("/changing.html", lambda _r: HTMLResponse(page("Changing", CHANGING["text"]))),
            Route("/forms.html", lambda _r: HTMLResponse(FORMS)), Route("/links.html", lambda _r: HTMLResponse(LINKS)),
            Route("/gallery.html", lambda _r: HTMLResponse(GALLERY)), Route("/blog/", lambda _r: HTMLResponse(BLOG)),
            Route("/feeds/rss.xml", xml(RSS, "application/rss+xml")),
            Route("/feeds/atom.xml", xml(ATOM, "application/atom+xml")),
            Route("/feeds/rdf.xml", xml(RDF, "application/rdf+xml")),
            Route("/feeds/mislabelled", xml(RSS, "text/html")),
            Route("/feeds/feed.json", xml(JSON_FEED, "application/feed+json")),
            Route("/feeds/bad.xml", xml("<rss><channel>", "application/xml")),
            Route("/feeds/notfeed.xml", xml("<html-ish/>", "application/xml")), *header_routes()]  # fmt: skip


def build_site() -> Starlette:
    async def html(request: Request) -> Response:
        body = PAGES.get(request.url.path)
        return HTMLResponse(body) if body else HTMLResponse("<h1>not found</h1>", 404)

    async def robots(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        return PlainTextResponse(f"User-agent: *\nDisallow: /docs/private/\n\nSitemap: {base}/sitemap.xml\n")

    async def sitemap_index(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        xml = ('<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               f"<sitemap><loc>{base}/sitemap-docs.xml</loc></sitemap>"
               f"<sitemap><loc>{base}/sitemap-blog.xml.gz</loc></sitemap></sitemapindex>")  # fmt: skip
        return Response(xml, media_type="application/xml")

    async def sitemap_docs(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        paths = ["/docs/", "/docs/install.html", "/docs/usage.html"]
        urls = "".join(f"<url><loc>{base}{p}</loc><lastmod>2026-11-0{i + 1}</lastmod>"
                       f"<priority>0.{i + 5}</priority></url>" for i, p in enumerate(paths))  # fmt: skip
        xml = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        return Response(xml, media_type="application/xml")

    async def sitemap_blog(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        xml = (f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{base}'
               "/blog/post.html</loc><changefreq>weekly</changefreq></url></urlset>")  # fmt: skip
        return Response(gzip.compress(xml.encode()), media_type="application/gzip")

    async def data(_request: Request) -> Response:
        return JSONResponse({"not": "html"})

    return Starlette(routes=[
        Route("/robots.txt", robots), Route("/sitemap.xml", sitemap_index), Route("/sitemap-docs.xml", sitemap_docs),
        Route("/sitemap-blog.xml.gz", sitemap_blog), Route("/docs/data.json", data),
        Route("/broken.xml", lambda _r: Response("<urlset><url>no end", media_type="application/xml")),
        Route("/docs/old.html", lambda _r: RedirectResponse("/blog/post.html")), *live_routes(),
        Route("/{path:path}", html),
    ])  # fmt: skip
