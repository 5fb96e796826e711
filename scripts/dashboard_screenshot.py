"""Make docs/dashboard.png, the README's screenshot: a real server, real traffic, the real page in headless Chromium.

    python scripts/dashboard_screenshot.py [--output docs/dashboard.png] [--seconds 12]

Uses the browser test's own steps (tests/browser.py) and Debian's chromium (.ci/install-system-deps).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import browser  # noqa: E402
from tests.test_e2e import server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "dashboard.png")
    parser.add_argument("--seconds", type=float, default=12.0, help="how long traffic runs before the screenshot")
    args = parser.parse_args()
    missing = browser.chromium_missing()
    if missing:
        sys.exit(missing)
    with tempfile.TemporaryDirectory() as tmp:
        project = browser.write_project(Path(tmp) / "project")
        with server("--project", str(project), "--no-access-log") as (url, _), browser.browser_page(1100, 760) as page:
            browser.open_dashboard(page, url, interval=0.5)
            stop = threading.Event()

            def traffic() -> None:  # bursts of varying size, so the chart has a shape
                rounds = 1
                while not stop.is_set():
                    browser.send_traffic(url, rounds)
                    rounds = rounds % 4 + 1
                    stop.wait(0.3)

            thread = threading.Thread(target=traffic)
            thread.start()
            time.sleep(args.seconds)  # a screenshot of traffic over time; no test waits like this
            stop.set()
            thread.join()
            browser.wait_polls(page, int(page.evaluate("Number(document.body.dataset.polls)")) + 1)
            page.screenshot(path=str(args.output), full_page=True)
    print(f"{args.output}: {args.output.stat().st_size} bytes")


if __name__ == "__main__":
    main()
