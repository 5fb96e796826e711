"""Drive /docs and /dashboard in a real headless Chromium (Debian's, through Playwright): the browser test and
``scripts/dashboard_screenshot.py`` share these steps.

Playwright is only the driver: the browser is the system's ``chromium`` (``.ci/install-system-deps``);
``playwright install`` is never needed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "handlers_examples"
CHROMIUM = os.environ.get("LOCALSERVE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 30_000  # the longest any one step may wait for the page (a condition, never a sleep)


def chromium_missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, as .ci/install-system-deps does)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    return None


PRICE = """
class PythonPredictor:
    def __init__(self, config):
        pass

    def predict(self, payload):
        return {"price": payload["size"] * 2}
"""


def write_project(root: Path) -> Path:
    """Three APIs: ``iris`` (JSON, ONNX with a classification tracker), ``echo`` (ABEJA multipart upload) and
    ``price`` (a Python predictor with a regression tracker)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cortex.yaml").write_text(
        "- kind: api\n  name: iris\n  model: iris.onnx\n  request_handler: handler.py\n"
        "  tracker: {key: class_label, model_type: classification}\n"
        "- kind: api\n  name: echo\n  handler: echo:handler\n"
        "- kind: api\n  name: price\n  predictor: {type: python, path: price.py}\n"
        "  tracker: {key: price, model_type: regression}\n"
    )
    (root / "price.py").write_text(PRICE)
    for file in ("iris.onnx", "handler.py", "sample.json"):
        shutil.copy(EXAMPLES / "iris_onnx" / file, root / file)
    shutil.copy(EXAMPLES / "multipart_echo" / "main.py", root / "echo.py")
    return root


IRIS_SAMPLES = [
    {"sepal_length": 5.2, "sepal_width": 3.6, "petal_length": 1.4, "petal_width": 0.3},
    {"sepal_length": 6.0, "sepal_width": 2.7, "petal_length": 4.1, "petal_width": 1.0},
    {"sepal_length": 7.2, "sepal_width": 3.0, "petal_length": 6.1, "petal_width": 2.3},
]


PRICE_SIZES = [0.15, 0.6, 0.75, 38.5]  # prices 0.3, 1.2, 1.5, 77 (mean 20): bins (0.2, 0.5], (1, 2] twice, (50, 100]


def send_traffic(url: str, rounds: int, key: str | None = None) -> dict[str, int]:
    """``rounds`` times: the three iris samples, one bad iris body, one upload to echo, the four ``PRICE_SIZES``
    to price; the classes seen."""
    classes: dict[str, int] = {}
    headers = {"authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=url, timeout=30, headers=headers) as client:
        for _ in range(rounds):
            for sample in IRIS_SAMPLES:
                label = client.post("/iris", json=sample).json()["class_label"]
                classes[label] = classes.get(label, 0) + 1
            assert client.post("/iris", content=b"{", headers={"content-type": "application/json"}).status_code == 400
            assert client.post("/echo", files={"file": ("a.txt", b"abc")}).status_code == 200
            for size in PRICE_SIZES:
                assert client.post("/price", json={"size": size}).status_code == 200
    return classes


@contextmanager
def browser_page(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A fresh page of the system's Chromium, headless; console errors are collected in ``page.errors``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(WAIT_MS)
            page.errors = []
            page.on("pageerror", lambda exc: page.errors.append(str(exc)))
            page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
            yield page
        finally:
            browser.close()


def save_key(page: Any, key: str) -> None:
    """Type the API key into the page's key field and save it (kept in the browser's localStorage)."""
    page.fill("#api-key", key)
    page.click("#key-form button")


def execute(page: Any, operation: str, *, content_type: str | None = None, upload: Path | None = None) -> Any:
    """In /docs: open ``operation`` ("<tag>-<operationId>"), send it, and return the response's status and body."""
    block = page.locator(f"#operations-{operation}")
    block.locator(".opblock-summary-control").click()
    if content_type is not None:
        block.locator("select.content-type").first.select_option(content_type)
    if upload is not None:
        block.locator("input[type=file]").set_input_files(str(upload))
    block.locator("button.execute").click()
    status = block.locator(".live-responses-table .response .response-col_status")
    status.wait_for()
    body = block.locator(".live-responses-table .response .response-col_description pre").first.inner_text()
    return int(status.inner_text().strip()), json.loads(body)


def open_docs(page: Any, url: str) -> None:
    page.goto(f"{url}/docs")
    page.locator("#operations-iris-post_iris").wait_for()


def open_dashboard(page: Any, url: str, interval: float = 0.25) -> None:
    """Load /dashboard, refreshed every ``interval`` seconds, and wait for its first figures."""
    page.goto(f"{url}/dashboard?interval={interval}")
    wait_polls(page, 1)


def wait_polls(page: Any, polls: int) -> None:
    """Wait until the dashboard has polled ``polls`` times since it was loaded."""
    page.wait_for_function(f"Number(document.body.dataset.polls || 0) >= {polls}")


def figure(page: Any, api: str, name: str) -> str:
    text: str = page.locator(f'[data-api="{api}"] [data-figure="{name}"] dd').inner_text()
    return text


# What a chart's text measures in the page: its computed font size and its rendered height (CSS px), and the
# SVG's scale on screen (1: one user unit a pixel), for each chart of each card.
CHART_TEXT = """
() => [...document.querySelectorAll("svg.chart")].map((chart) => ({
  api: chart.closest("[data-api]").dataset.api,
  chart: chart.dataset.chart,
  scale: chart.getScreenCTM().a,
  ticks: [...chart.querySelectorAll("text[data-tick]")].map((t) => t.textContent),
  sizes: [...chart.querySelectorAll("text")].map((t) => getComputedStyle(t).fontSize),
  heights: [...chart.querySelectorAll("text")].map((t) => Math.round(t.getBoundingClientRect().height * 10) / 10),
}))
"""


def chart_text(page: Any) -> list[dict[str, Any]]:
    """``CHART_TEXT`` of the page."""
    found: list[dict[str, Any]] = page.evaluate(CHART_TEXT)
    return found


def shots_dir(fallback: Path) -> Path:
    """Where the browser tests save their screenshots: ``$LOCALSERVE_SHOTS`` (to look at them), else ``fallback``."""
    folder = Path(os.environ.get("LOCALSERVE_SHOTS") or fallback)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
