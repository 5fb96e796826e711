"""The built documentation site in a real headless Chromium (Debian's, through Playwright, as
``tests/test_browser.py`` drives the dashboard): navigation, search and highlighted code at desktop and
phone width, and not one request leaving the site (it works offline)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests import browser

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(browser.chromium_missing() is not None, reason=browser.chromium_missing() or ""),
]

PHONE = (390, 844)
DESKTOP = (1280, 900)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def url(site: Path) -> Iterator[str]:
    """The built site over HTTP on a free port (search fetches its index, which file:// would refuse)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def opened(page: Any, url: str, path: str) -> list[str]:
    """Open ``path``, recording every URL the page asks for; wait until the page has loaded."""
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(f"{url}{path}", wait_until="networkidle")
    return requests


def outside(requests: list[str], url: str) -> list[str]:
    return [r for r in requests if not r.startswith((url, "data:", "blob:", "about:"))]


def search(page: Any, words: str) -> list[str]:
    """Type ``words`` into the search box and return the titles of the results."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator("input.md-search__input")
    if not box.is_visible():  # the phone layout hides the box behind its icon
        page.locator('label.md-header__button[for="__search"]').click()
    # A query typed while the search worker still loads its index is not run again once it is ready (on a loaded
    # machine that takes seconds): type it again until the results come, up to two minutes in all.
    results = page.locator(".md-search-result__item")
    for _ in range(24):
        box.fill("")
        box.press_sequentially(words)
        try:
            results.first.wait_for(timeout=5_000)
            break
        except PlaywrightTimeout:
            continue
    results.first.wait_for(timeout=5_000)
    return [
        text.strip()
        for text in page.locator(".md-search-result__item h1, .md-search-result__item h2").all_inner_texts()
    ]


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_navigation_search_and_code_offline(url: str, size: tuple[int, int]) -> None:
    with browser.browser_page(*size) as page:
        requests = opened(page, url, "/")
        if size == PHONE:  # the sections are in the drawer
            page.locator('label.md-header__button[for="__drawer"]').click()
            page.locator(".md-nav--primary").first.wait_for()
            sections = page.evaluate(
                "() => [...document.querySelectorAll('.md-nav--primary > .md-nav__list > .md-nav__item')]"
                ".filter(item => item.checkVisibility()).map(item => item.innerText.split('\\n')[0].trim())"
            )
            page.locator("label.md-overlay").click(position={"x": 380, "y": 400})  # close the drawer
        else:
            sections = [t.strip() for t in page.locator(".md-tabs__link").all_inner_texts()]
        assert [s for s in sections if s in ("Tutorials", "How-to guides", "Reference", "Explanation")] == [
            "Tutorials",
            "How-to guides",
            "Reference",
            "Explanation",
        ]
        # a link of the page leads to its section
        page.locator('article a[href="reference/"]').first.click()
        page.wait_for_url(f"{url}/reference/")
        assert page.locator("article h1").inner_text().strip(" ¶\n") == "Reference"
        # search finds a flag on the generated CLI page
        found = search(page, "max_batch_size")
        assert any("Config file" in title or "Batching" in title for title in found), found
        # code is highlighted: the tokens of a bash block have colours of their own
        requests += opened(page, url, "/tutorials/first-abeja-handler/")
        colours = page.evaluate(
            "() => [...document.querySelectorAll('.highlight code span')].map(s => getComputedStyle(s).color)"
        )
        assert len(set(colours)) >= 3, colours
        errors = page.errors
    assert outside(requests, url) == []
    assert errors == []
