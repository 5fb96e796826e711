"""``localserve get`` and ``check`` through click's CliRunner: ``get`` against a stand-in server on loopback (the
network is the process boundary it has) that answers what ``GET /stats`` answers, with and without the key.

``check`` on projects is tested in tests/checks/test_probe.py, ``export`` in tests/export/."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from localserve.cli import main
from tests.cli.test_get_tables import GET_JSON


class Stats(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != "Bearer k":
            body, status = b'{"error": "Unauthorized"}', 401
        elif self.path == "/stats":
            body, status = json.dumps(GET_JSON).encode(), 200
        elif self.path == "/iris/stats":
            body, status = json.dumps(GET_JSON[0]).encode(), 200
        else:
            body, status = b'{"error": "no such API"}', 404
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stats)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def get(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, ["get", *args])
    return done.exit_code, done.stdout, done.stderr


def test_get_prints_the_tables_or_the_json(url: str) -> None:
    code, out, _ = get("--url", url, "--api-key", "k")
    assert code == 0 and out.startswith("api    status    2xx  4xx  5xx") and "iris: classification" in out
    code, out, _ = get("iris", "--url", url + "/", "--api-key", "k", "--json")
    assert (code, json.loads(out)) == (0, GET_JSON[0])


def test_a_server_that_refuses_says_why_and_what_to_give(url: str) -> None:
    code, _, err = get("--url", url)
    assert (code, err) == (
        1,
        f'Error: {url}/stats answered 401: {{"error": "Unauthorized"}} (give the server\'s key: --api-key KEY or '
        "LOCALSERVE_API_KEY)\n",
    )
    code, _, err = get("mnist", "--url", url, "--api-key", "k")
    assert (code, err) == (1, f'Error: {url}/mnist/stats answered 404: {{"error": "no such API"}}\n')


def test_no_server_is_named_with_what_to_run() -> None:
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = get("--url", url)
    assert code == 1
    assert err.startswith(f"Error: Cannot reach localserve at {url}: ")
    assert err.endswith(". Is `localserve serve` running?\n")
