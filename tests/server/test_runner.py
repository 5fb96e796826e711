"""server.runner.Runner: one App, started and stopped one way (run's call, a peer's thread; serve in test_e2e)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from localserve.config import load_config
from localserve.errors import HandlerLoadError
from localserve.server import App, ServeOptions
from localserve.server.inprocess import call
from localserve.server.runner import Runner

HANDLER = "def handler(request, context):\n    return {'content': {'got': request.read().decode()}}\n"


@pytest.fixture
def project(make_project, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project({"main.py": HANDLER, "broken.py": "raise ImportError('no such thing')\n"})
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    return root


def test_call_loads_every_api_sends_one_request_and_stops(project: Path) -> None:
    runner = Runner(load_config(project, handler="main:handler"), ServeOptions())
    status, _, body = runner.call(lambda app: call(app, "POST", "/predict", [], b"hi"))
    assert (status, body) == (200, b'{"got":"hi"}')
    assert [rt.pipeline.join(5) for rt in runner.app.apis.values()] == [[]]  # its threads have ended


def test_call_raises_the_load_failure(project: Path) -> None:
    runner = Runner(load_config(project, handler="broken:handler"), ServeOptions())
    sent: list[App] = []

    async def send(app: App) -> None:
        sent.append(app)

    with pytest.raises(HandlerLoadError, match="ImportError: no such thing"):
        runner.call(send)
    assert sent == [] and runner.failure is not None


def test_start_in_thread_answers_on_its_port_until_stopped(project: Path) -> None:
    runner = Runner(load_config(project, handler="main:handler"), ServeOptions(metrics=False))
    port = runner.start_in_thread(wait=60)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        assert httpx.post(f"http://127.0.0.1:{port}/predict", content=b"x").json() == {"got": "x"}
    finally:
        runner.stop_thread()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz")
