"""/docs and /dashboard in a real headless Chromium against ``localserve serve`` on a free port."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import browser
from tests.conftest import wait_until
from tests.test_e2e import server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(browser.chromium_missing() is not None, reason=browser.chromium_missing() or ""),
]


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    project = browser.write_project(tmp_path / "project")
    with server("--project", str(project)) as (base, _):
        yield base


def test_docs_sends_a_json_request_and_a_file_upload(url: str, tmp_path: Path) -> None:
    upload = tmp_path / "upload.txt"
    upload.write_bytes(b"hello from the browser\n")
    expected_iris = httpx.post(f"{url}/iris", json=browser.IRIS_SAMPLES[0]).json()
    with browser.browser_page() as page:
        browser.open_docs(page, url)
        # the example is the project's sample.json, sent as it is
        assert browser.execute(page, "iris-post_iris") == (200, expected_iris)
        status, body = browser.execute(page, "echo-post_echo", content_type="multipart/form-data", upload=upload)
        page.screenshot(path=str(tmp_path / "docs.png"), full_page=True)
        errors = page.errors
    assert (status, body) == (
        200,
        {
            "parts": [
                {
                    "form_name": "file",
                    "file_name": "upload.txt",
                    "content_type": "text/plain",
                    "size": 23,
                    "sha256": hashlib.sha256(b"hello from the browser\n").hexdigest(),
                }
            ]
        },
    )
    assert errors == []
    assert (tmp_path / "docs.png").stat().st_size > 0


def test_dashboard_shows_the_figures_and_draws_the_chart(url: str, tmp_path: Path) -> None:
    classes = browser.send_traffic(url, 2)
    with browser.browser_page() as page:
        browser.open_dashboard(page, url)
        assert browser.figure(page, "iris", "2xx") == "6"
        assert browser.figure(page, "iris", "4xx") == "2"
        assert browser.figure(page, "echo", "2xx") == "2"
        assert page.locator('[data-api="iris"] [data-status]').inner_text() == "ready"
        assert page.locator('[data-api="iris"] .meta').inner_text() == "request_handler · onnx · CPU"
        assert browser.figure(page, "iris", "p50").endswith(" ms")
        # the tracker's classes as bars: every label with its count
        bars = page.locator('[data-api="iris"] [data-bars="classes"]').inner_text().split("\n")
        assert dict(zip(bars[0::2], map(int, bars[1::2]), strict=True)) == classes
        # the regression tracker: its figures, and its histogram's non-empty bins with a gap for empty ones
        assert [browser.figure(page, "price", name) for name in ("count", "min", "mean", "max")] == [
            "8",
            "0.300",
            "20.000",
            "77.000",
        ]
        histogram = page.locator('[data-api="price"] [data-bars="histogram"]').inner_text().split("\n")
        dash = "\N{EN DASH}"
        assert histogram == [f"0.2 {dash} 0.5", "2", "⋯", f"1 {dash} 2", "4", "⋯", f"50 {dash} 100", "2"]
        # traffic while the page is open shows up as a point of the latency chart and in the counts
        browser.send_traffic(url, 1)
        page.wait_for_function(
            "document.querySelector('[data-api=\"iris\"] [data-figure=\"2xx\"] dd').textContent === '9'"
        )
        page.locator('[data-api="iris"] svg[data-chart="latency"] circle[data-series="p50"]').first.wait_for()
        page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        errors = page.errors
    assert errors == []


def test_dashboard_fits_a_phone_screen(url: str, tmp_path: Path) -> None:
    with browser.browser_page(width=390, height=844) as page:
        browser.open_dashboard(page, url)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        page.screenshot(path=str(tmp_path / "dashboard-phone.png"), full_page=True)
    assert overflow == 0


def test_the_pages_send_the_saved_api_key(url: str) -> None:
    with browser.browser_page() as page:
        sent: list[tuple[str, str | None]] = []
        page.on("request", lambda r: sent.append((r.url.removeprefix(url), r.headers.get("authorization"))))
        browser.open_dashboard(page, url)
        browser.save_key(page, "s3cret")
        browser.wait_polls(page, 3)
        browser.open_docs(page, url)  # the key is kept in the browser for the other page too
        assert browser.execute(page, "iris-post_iris")[0] == 200
    data = [auth for path, auth in sent if path == "/dashboard/data"]
    assert data[0] is None and data[-1] == "Bearer s3cret"
    assert ("/openapi.json", "Bearer s3cret") in sent
    assert ("/iris", "Bearer s3cret") in sent


def test_with_an_api_key_the_pages_ask_for_it_and_work_with_it(tmp_path: Path) -> None:
    key = "s3cret-key"
    project = browser.write_project(tmp_path / "project")
    with server("--project", str(project), "--api-key", key) as (url, _):
        classes = browser.send_traffic(url, 1, key=key)
        expected_iris = httpx.post(
            f"{url}/iris", json=browser.IRIS_SAMPLES[0], headers={"authorization": f"Bearer {key}"}
        )
        # /docs: without the key even the document is refused; once entered, "Try it out" succeeds
        with browser.browser_page() as page:
            page.goto(f"{url}/docs")
            page.locator("#key-state", has_text="401: this server needs an API key; enter it").wait_for()
            assert page.locator("#operations-iris-post_iris").count() == 0
            browser.save_key(page, key)
            page.locator("#operations-iris-post_iris").wait_for()
            assert browser.execute(page, "iris-post_iris") == (200, expected_iris.json())
            page.screenshot(path=str(tmp_path / "docs-key.png"), full_page=True)
            docs_errors = page.errors
        # /dashboard in a fresh browser (no key kept): a 401 asks for the key; once entered, the figures show
        with browser.browser_page() as page:
            page.goto(f"{url}/dashboard?interval=0.25")
            page.locator("#notice", has_text="401: this server needs an API key; enter it above.").wait_for()
            assert page.locator("[data-api]").count() == 0
            browser.save_key(page, key)
            browser.wait_polls(page, 1)
            assert browser.figure(page, "iris", "2xx") == "5"  # the 3 samples of the traffic, /docs's and ours
            bars = page.locator('[data-api="iris"] [data-bars="classes"]').inner_text().split("\n")
            assert sum(map(int, bars[1::2])) == sum(classes.values()) + 2
            assert browser.figure(page, "price", "count") == "4"
            page.screenshot(path=str(tmp_path / "dashboard-key.png"), full_page=True)
            dashboard_errors = page.errors
    # the only errors are the browser's reports of the refused requests, before the key was entered
    assert docs_errors and all("401 (Unauthorized)" in error for error in docs_errors)
    assert dashboard_errors and all("401 (Unauthorized)" in error for error in dashboard_errors)


def loaded(url: str) -> bool:
    try:
        apis = httpx.get(f"{url}/readyz").json()["apis"]
    except httpx.TransportError:  # not listening yet
        return False
    return all(api["status"] != "loading" for api in apis.values())


ICON = """
async () => {
  const link = document.querySelector("link[rel=icon]");
  const image = new Image();
  image.src = link.href;
  await image.decode();
  return [new URL(link.href).pathname, image.naturalWidth];
}
"""

FAILING = """
class PythonPredictor:
    def __init__(self, config):
        raise RuntimeError("no vocabulary")

    def predict(self, payload):
        return payload
"""


def test_dashboard_chart_text_keeps_its_size_and_the_axes_one_format_at_any_width(url: str, tmp_path: Path) -> None:
    shots = browser.shots_dir(tmp_path)
    browser.send_traffic(url, 1)
    measured = {}
    for width in (420, 1400):
        with browser.browser_page(width=width, height=900) as page:
            browser.open_dashboard(page, url)
            browser.send_traffic(url, 1)  # a second poll with traffic: both charts have points
            browser.wait_polls(page, 3)
            measured[width] = browser.chart_text(page)
            page.screenshot(path=str(shots / f"dashboard-{width}.png"), full_page=True)
            errors = page.errors
        assert errors == []
    small, large = measured[420], measured[1400]
    assert [(c["api"], c["chart"]) for c in small] == [(c["api"], c["chart"]) for c in large]
    assert {c["chart"] for c in small} == {"latency", "rate"}
    for chart in small + large:
        assert chart["scale"] == 1  # drawn at its width in pixels: nothing scales its text
        assert set(chart["sizes"]) == {"11px"}
        assert len(chart["ticks"]) == 3
        # one formatter: the three ticks of an axis have the same decimals, and the chart's unit
        decimals = {len(tick.split(" ")[0].removesuffix("/s").partition(".")[2]) for tick in chart["ticks"]}
        assert len(decimals) == 1, chart["ticks"]
        assert all(tick.endswith(" ms" if chart["chart"] == "latency" else "/s") for tick in chart["ticks"])
    assert [c["heights"][0] for c in small] == [c["heights"][0] for c in large]  # the same text, the same height


def test_dashboard_draws_no_chart_for_a_failed_api_and_the_pages_have_their_icon(tmp_path: Path) -> None:
    shots = browser.shots_dir(tmp_path)
    project = browser.write_project(tmp_path / "project")
    (project / "broken.py").write_text(FAILING)
    with (project / "cortex.yaml").open("a") as config:
        config.write("- kind: api\n  name: broken\n  predictor: {type: python, path: broken.py}\n")
    with server("--project", str(project), "--keep-going", ready=False) as (url, _):
        wait_until(lambda: loaded(url), "every API loaded or failed")
        browser.send_traffic(url, 1)
        with browser.browser_page(width=1400) as page:
            icons: list[tuple[str, int]] = []
            page.on(
                "response", lambda r: icons.append((r.url.removeprefix(url), r.status)) if "favicon" in r.url else None
            )
            browser.open_dashboard(page, url)
            broken = page.locator('[data-api="broken"]')
            assert broken.locator("[data-status]").inner_text() == "failed"
            assert broken.locator(".error").inner_text() == (
                "PythonPredictor.__init__ raised RuntimeError: no vocabulary"
            )
            assert broken.locator("svg.chart").count() == 0
            assert page.locator('[data-api="iris"] svg.chart').count() == 2
            page.screenshot(path=str(shots / "dashboard-failed-api.png"), full_page=True)
            icons = [page.evaluate(ICON)]
            page.goto(f"{url}/docs")
            page.locator("#operations-iris-post_iris").wait_for()
            assert page.locator("#operations-tag-v2").count() == 1  # iris is a V2 model
            icons.append(page.evaluate(ICON))
            errors = page.errors
    assert icons == [["/favicon.ico", 32], ["/favicon.ico", 32]]  # both pages' icon, decoded by the browser
    assert errors == []


def test_docs_has_no_v2_section_without_a_v2_model(tmp_path: Path) -> None:
    shots = browser.shots_dir(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "echo.py").write_text(browser.EXAMPLES.joinpath("multipart_echo", "main.py").read_text())
    with (
        server("--project", str(project), "--handler", "echo:handler") as (url, _),
        browser.browser_page(width=1400) as page,
    ):
        page.goto(f"{url}/docs")
        page.locator("#operations-project-post_project").wait_for()
        tags = page.locator(".opblock-tag").all_inner_texts()
        models = page.locator(".models").count() and page.locator(".models").inner_text()
        page.screenshot(path=str(shots / "docs-no-v2.png"), full_page=True)
    assert [tag.split("\n")[0] for tag in tags] == ["project", "health", "observability", "pages"]
    assert "V2" not in str(models)


def test_dashboard_shows_a_traffic_splitter_with_its_apis_weights_and_shadow(tmp_path: Path) -> None:
    shots = browser.shots_dir(tmp_path)
    with server("--project", str(browser.EXAMPLES / "iris_splitter")) as (url, _):
        for sample in browser.IRIS_SAMPLES * 2:
            assert httpx.post(f"{url}/iris", json=sample).status_code == 200
        # the shadow's copies are answered after the client's answers: the page is opened once they are counted
        wait_until(lambda: httpx.get(f"{url}/iris/stats").json()["shadow"]["answered"] == 6, "6 copies answered")
        served = {name: t["requests"]["2xx"] for name, t in httpx.get(f"{url}/iris/stats").json()["targets"].items()}
        with browser.browser_page(width=1400) as page:
            browser.open_dashboard(page, url)
            card = page.locator('[data-splitter="iris"]')
            assert card.locator("[data-status]").inner_text() == "ready"
            assert card.locator(".meta").inner_text() == "TrafficSplitter · iris-onnx 80% · iris-rules 20%"
            assert card.locator('[data-figure="2xx"] dd').inner_text() == "6"
            rows = {
                name: card.locator(f'tr[data-target="{name}"] td').all_inner_texts()
                for name in ("iris-onnx", "iris-rules")
            }
            assert rows == {
                name: [name, weight, str(served[name]), "0", "0"]
                for name, weight in (("iris-onnx", "80%"), ("iris-rules", "20%"))
            }
            assert card.locator("[data-shadow]").inner_text() == (
                "shadow: iris-candidate (a copy of 100% of the requests; its answers are dropped)"
            )
            shadow = card.locator("[data-shadow-figures] dd").all_inner_texts()
            assert shadow == ["6", "0", "0"]  # answered, failed, dropped
            # the APIs it splits between keep their own cards
            assert page.locator("[data-api]").evaluate_all("cards => cards.map((c) => c.dataset.api)") == [
                "iris-onnx",
                "iris-rules",
                "iris-candidate",
            ]
            page.screenshot(path=str(shots / "dashboard-splitter.png"), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})  # and it fits a phone screen
            browser.wait_polls(page, int(page.evaluate("document.body.dataset.polls")) + 1)
            assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") == 0
            errors = page.errors
    assert errors == []


def test_dashboard_shows_a_failed_reload_until_the_next_good_save(make_project) -> None:
    """serve --reload: a bad edit is shown above the APIs (the last good version still serving); a good save clears it."""
    from tests.server.test_reload import FAILED, RELOADED, edit, handler, serving

    project = make_project({"main.py": handler("v1")})
    with serving(project, "--handler", "main:handler") as served, browser.browser_page() as page:
        browser.open_dashboard(page, served.url)
        banner = page.locator("#reload")
        assert banner.is_hidden()
        mark = served.mark()
        edit(project / "main.py", "def handler(request, context):\n    return {\n")  # a syntax error
        served.wait_line(FAILED, mark)
        banner.wait_for(state="visible")
        text = banner.inner_text()
        assert text.startswith("reload failed (still serving the last good version) after main.py changed: ")
        assert "SyntaxError" in text
        assert page.locator('[data-api="proj"] [data-status]').inner_text() == "ready"
        assert httpx.post(served.url).text == "v1"
        mark = served.mark()
        edit(project / "main.py", handler("v2"))
        served.wait_line(RELOADED, mark)
        banner.wait_for(state="hidden")
        assert httpx.post(served.url).text == "v2"
        errors = page.errors
    assert errors == []


# Each cell of the dashboard's "models" table: its padding and the gap to the next cell's text, in CSS px.
MODEL_CELLS = """
() => [...document.querySelectorAll("table.models tr")].map((row) => [...row.cells].map((cell) => {
  const style = getComputedStyle(cell);
  return [cell.textContent, parseFloat(style.paddingLeft), parseFloat(style.paddingRight)];
}))
"""


def test_dashboard_says_no_requests_yet_and_lays_out_the_models_table(tmp_path: Path) -> None:
    shots = browser.shots_dir(tmp_path)
    with (
        server("--project", str(browser.EXAMPLES / "iris_models")) as (url, _),
        browser.browser_page(width=1000) as page,
    ):
        browser.open_dashboard(page, url)
        card = page.locator('[data-api="iris-models"]')
        empty = card.locator("svg.chart text[data-empty]").all_text_contents()
        assert empty == ["no requests yet", "no requests yet"]  # latency and rate, before any request
        assert httpx.post(f"{url}/iris-models", json={"model": "iris", "input": [5.1, 3.5, 1.4, 0.2]}).is_success
        page.locator("table.models td").first.wait_for()
        page.wait_for_function("!document.querySelector('[data-api=\"iris-models\"] text[data-empty]')")
        cells = page.evaluate(MODEL_CELLS)
        page.screenshot(path=str(shots / "dashboard-models.png"), full_page=True)
        errors = page.errors
    assert [text for text, _, _ in cells[0]] == ["model", "version", "loads", "evictions", "load", "calls", "mean"]
    assert cells[1][:3] == [["iris", 8, 8], ["2", 8, 8], ["1", 8, 8]]  # padded apart, never run together
    assert errors == []
