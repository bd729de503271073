"""A small loopback web site for the web-search tests: docs pages with links, boilerplate, tables and metadata,
a robots.txt with a disallowed folder and a sitemap index, pages outside the crawl prefix, and a JSON file."""

from __future__ import annotations

import gzip

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
        Route("/docs/old.html", lambda _r: RedirectResponse("/blog/post.html")),
        Route("/{path:path}", html),
    ])  # fmt: skip
