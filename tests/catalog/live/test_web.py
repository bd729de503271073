"""@playwright/mcp driving Debian's headless Chromium against a page served on loopback by the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.catalog.live.helpers import Call, run_live
from tests.conftest import static_page

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

LOCAL_SITE = {"defaults": {"allow_private_network": True}}
"""The test's site is on loopback, which the per-call policy refuses a browser unless the user allows it."""

FORM = b"""<!doctype html><html><head><title>Catalog form</title></head><body>
<h1>Greeter</h1>
<label for="name">Name</label><input id="name" type="text">
<button id="go" onclick="var n = document.getElementById('name').value;
  document.getElementById('out').textContent = 'Hello, ' + n; console.log('greeted ' + n);">Greet</button>
<p id="out"></p>
</body></html>"""


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with static_page(FORM, "/form.html") as url:
        yield url


async def test_playwright_fills_a_form_and_reads_the_page(tmp_path: Path, site: str) -> None:
    calls = [
        Call("browser_navigate", {"url": site}, "Catalog form"),
        Call("browser_snapshot", {}, "Greet"),
        Call("browser_type", {"target": "#name", "text": "hub", "element": "name field"}, ""),
        Call("browser_click", {"target": "#go", "element": "Greet button"}, ""),
        Call("browser_wait_for", {"text": "Hello, hub"}, "Hello, hub"),
        Call("browser_evaluate", {"function": "() => document.querySelector('#out').textContent"}, "Hello, hub"),
        Call("browser_find", {"text": "hello, hub"}, "Hello, hub"),
        Call("browser_console_messages", {"level": "info"}, "greeted hub"),
        Call("browser_network_requests", {"static": True}, "form.html"),
        Call("browser_tabs", {"action": "list"}, "Catalog form"),
        Call("browser_close", {}, ""),
    ]
    await run_live("playwright", tmp_path, calls, policy=LOCAL_SITE, call_timeout=60)


async def test_chrome_devtools_inspects_and_drives_a_page(tmp_path: Path, site: str) -> None:
    page = 2  # page 1 is the browser's initial about:blank
    calls = [
        Call("new_page", {"url": site}, "Catalog form"),
        Call("take_snapshot", {"pageId": page}, 'textbox \\"Name\\"'),
        Call("fill", {"pageId": page, "uid": "1_3", "value": "hub"}, ""),
        Call("click", {"pageId": page, "uid": "1_4"}, ""),
        Call("wait_for", {"pageId": page, "text": ["Hello, hub"]}, "Hello, hub"),
        Call(
            "evaluate_script", {"pageId": page, "function": "() => document.querySelector('#out').textContent"}, "hub"
        ),
        Call("list_console_messages", {"pageId": page}, "greeted hub"),
        Call("list_network_requests", {"pageId": page}, "form.html"),
        Call("take_screenshot", {"pageId": page}, "image/png"),
        Call("resize_page", {"pageId": page, "width": 800, "height": 600}, ""),
        Call("list_pages", {}, "Catalog form"),
        Call("close_page", {"pageId": page}, ""),
    ]
    await run_live("chrome-devtools", tmp_path, calls, policy=LOCAL_SITE, call_timeout=60)
