"""Auditing a URL's response headers: the redirect chain, caching, cookies (with their flags) and security headers,
each turned into findings with a severity (high, medium, low, info).

The checks follow the OWASP Secure Headers project and the cookie rules of RFC 6265bis: HSTS only counts over
HTTPS, a frame-ancestors CSP directive replaces X-Frame-Options, ``SameSite=None`` needs ``Secure``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2

from servers._common import ToolError

MAX_REDIRECTS = 10
HSTS_MIN_AGE = 15_552_000  # 180 days
SECURITY_HEADERS = ("strict-transport-security", "content-security-policy", "x-frame-options",
                    "x-content-type-options", "referrer-policy", "permissions-policy",
                    "cross-origin-opener-policy", "cross-origin-resource-policy")  # fmt: skip
CACHE_HEADERS = ("cache-control", "expires", "etag", "last-modified", "age", "vary", "pragma")
VERSION = re.compile(r"\d+\.\d+")


@dataclass
class Findings:
    """The findings of one audit, in the order they were found."""

    items: list[dict[str, str]] = field(default_factory=list)

    def add(self, severity: str, topic: str, message: str) -> None:
        self.items.append({"severity": severity, "topic": topic, "message": message})


async def redirect_chain(http: httpx2.AsyncClient, url: str) -> tuple[list[dict[str, Any]], httpx2.Headers]:
    """GET ``url`` following redirects by hand (at most ``MAX_REDIRECTS``); every hop and the last headers."""
    chain: list[dict[str, Any]] = []
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            async with http.stream("GET", current, follow_redirects=False) as response:
                status, headers = response.status_code, response.headers
        except httpx2.TimeoutException as exc:
            raise ToolError(f"fetching {current} timed out") from exc
        except httpx2.HTTPError as exc:
            raise ToolError(f"fetching {current} failed: {type(exc).__name__}: {exc}") from exc
        location = headers.get("location")
        target = urljoin(current, location) if location else None
        chain.append({"url": current, "status": status, "location": target})
        if not (300 <= status < 400 and target):
            return chain, headers
        if any(h["url"] == target for h in chain):
            raise ToolError(f"redirect loop: {' -> '.join(h['url'] for h in chain)} -> {target}")
        current = target
    raise ToolError(f"more than {MAX_REDIRECTS} redirects from {url}")


def parse_cookie(header: str) -> dict[str, Any]:
    """One Set-Cookie header: name, attributes and flags (the value itself is not reported)."""
    first, *attributes = [part.strip() for part in header.split(";")]
    name = first.split("=", 1)[0].strip()
    attrs: dict[str, str] = {}
    for attribute in attributes:
        key, _, value = attribute.partition("=")
        if key:
            attrs[key.strip().lower()] = value.strip()
    return {"name": name, "secure": "secure" in attrs, "httpOnly": "httponly" in attrs,
            "sameSite": attrs.get("samesite") or None, "path": attrs.get("path") or None,
            "domain": attrs.get("domain") or None, "expires": attrs.get("expires") or None,
            "maxAge": attrs.get("max-age") or None}  # fmt: skip


def check_chain(chain: list[dict[str, Any]], found: Findings) -> None:
    for before, after in itertools.pairwise(chain):
        old, new = urlsplit(before["url"]).scheme, urlsplit(after["url"]).scheme
        if old == "https" and new == "http":
            found.add("high", "redirects", f"{before['url']} redirects from HTTPS down to plain HTTP ({after['url']})")
        elif old == "http" and new == "https":
            found.add("info", "redirects", f"{before['url']} upgrades to HTTPS")
    if len(chain) > 3:
        found.add("low", "redirects", f"{len(chain) - 1} redirects before the final page (each costs a round trip)")


def check_security(headers: httpx2.Headers, https: bool, found: Findings) -> None:  # noqa: C901 - one rule a branch
    hsts = headers.get("strict-transport-security")
    if not https:
        found.add("medium", "transport", "served over plain HTTP: traffic can be read and changed in transit "
                  "(HSTS only applies over HTTPS)")  # fmt: skip
    elif not hsts:
        found.add("medium", "strict-transport-security", "HSTS missing: browsers may use plain HTTP first")
    else:
        age = re.search(r"max-age\s*=\s*\"?(\d+)", hsts, re.I)
        if not age or int(age.group(1)) < HSTS_MIN_AGE:
            found.add("low", "strict-transport-security", f"HSTS max-age below {HSTS_MIN_AGE} s (180 days)")
    csp = headers.get("content-security-policy", "")
    if not csp:
        found.add("medium", "content-security-policy", "no Content-Security-Policy: nothing limits injected scripts")
    else:
        for token in ("'unsafe-inline'", "'unsafe-eval'"):
            if token in csp:
                found.add("low", "content-security-policy", f"CSP allows {token}")
    xfo = headers.get("x-frame-options", "").strip().upper()
    if "frame-ancestors" not in csp and not xfo:
        found.add("medium", "x-frame-options", "neither X-Frame-Options nor CSP frame-ancestors: the page can be "
                  "framed (clickjacking)")  # fmt: skip
    elif xfo and xfo not in ("DENY", "SAMEORIGIN"):
        found.add("low", "x-frame-options", f"X-Frame-Options {xfo!r} is not DENY or SAMEORIGIN")
    if headers.get("x-content-type-options", "").strip().lower() != "nosniff":
        found.add("low", "x-content-type-options", "X-Content-Type-Options: nosniff missing (MIME sniffing)")
    referrer = headers.get("referrer-policy", "").strip().lower()
    if not referrer:
        found.add("low", "referrer-policy", "no Referrer-Policy (browser default applies)")
    elif "unsafe-url" in referrer:
        found.add("medium", "referrer-policy", "Referrer-Policy unsafe-url sends full URLs to every site")
    if "permissions-policy" not in headers:
        found.add("info", "permissions-policy", "no Permissions-Policy (browser features not restricted)")
    for name in ("server", "x-powered-by", "x-aspnet-version"):
        if VERSION.search(headers.get(name, "")):
            found.add("low", name, f"{name} discloses a software version: {headers[name]!r}")
    if (
        headers.get("access-control-allow-origin") == "*"
        and headers.get("access-control-allow-credentials", "").lower() == "true"
    ):
        found.add("high", "cors", "Access-Control-Allow-Origin * together with Allow-Credentials true")


def check_cookies(cookies: list[dict[str, Any]], https: bool, found: Findings) -> None:
    for cookie in cookies:
        name = cookie["name"]
        same_site = (cookie["sameSite"] or "").lower()
        if same_site == "none" and not cookie["secure"]:
            found.add("high", "cookies", f"cookie {name!r} has SameSite=None without Secure (browsers reject it)")
        if https and not cookie["secure"]:
            found.add("medium", "cookies", f"cookie {name!r} lacks Secure: it may also be sent over plain HTTP")
        if not cookie["httpOnly"]:
            found.add("low", "cookies", f"cookie {name!r} lacks HttpOnly: page scripts can read it")
        if not same_site:
            found.add("low", "cookies", f"cookie {name!r} has no SameSite attribute (browser default Lax)")


def caching(headers: httpx2.Headers, cookies: list[dict[str, Any]], found: Findings) -> dict[str, Any]:
    """The caching headers, the parsed Cache-Control directives and the caching findings."""
    control = headers.get("cache-control", "")
    directives: dict[str, str | bool] = {}
    for part in control.split(","):
        key, sep, value = part.strip().partition("=")
        if key:
            directives[key.lower()] = value.strip('"') if sep else True
    if not control and "expires" not in headers:
        found.add("info", "caching", "no Cache-Control or Expires: caches use heuristics")
    if not ("etag" in headers or "last-modified" in headers):
        found.add("info", "caching", "no ETag or Last-Modified: clients cannot revalidate cheaply")
    if cookies and "public" in directives:
        found.add("medium", "caching", "Cache-Control public on a response that sets cookies (shared caches may "
                  "hand them to other users)")  # fmt: skip
    return {"headers": {h: headers[h] for h in CACHE_HEADERS if h in headers}, "cacheControl": directives,
            "cacheable": not ({"no-store", "private"} & set(directives))}  # fmt: skip


def audit(chain: list[dict[str, Any]], headers: httpx2.Headers) -> dict[str, Any]:
    """The audit report of a fetched URL (its chain and final headers)."""
    final = chain[-1]["url"]
    https = urlsplit(final).scheme == "https"
    found = Findings()
    cookies = [parse_cookie(h) for h in headers.get_list("set-cookie")]
    check_chain(chain, found)
    check_security(headers, https, found)
    check_cookies(cookies, https, found)
    cache = caching(headers, cookies, found)
    order = {"high": 0, "medium": 1, "low": 2, "info": 3}
    findings = sorted(found.items, key=lambda f: order[f["severity"]])
    counts = {s: sum(1 for f in findings if f["severity"] == s) for s in order}
    return {
        "url": chain[0]["url"], "finalUrl": final, "status": chain[-1]["status"], "redirects": chain,
        "https": https, "security": {h: headers.get(h) for h in SECURITY_HEADERS}, "caching": cache,
        "cookies": cookies, "findings": findings, "counts": counts, "headers": dict(headers.items()),
    }  # fmt: skip
