"""--hide-errors, non-finite numbers out, paths kept out of load errors, a replica crashing at import.

--hide-errors and load failures in-process; a replica crashing at import needs real replica processes."""

from __future__ import annotations

import pytest

from localserve.server import ServeOptions
from tests.conftest import wait_until
from tests.test_e2e import output_of, server

NAN_PREDICTOR = """
class PythonPredictor:
    def __init__(self, config):
        pass

    def predict(self, payload):
        if payload.get("fail"):
            raise ValueError("secret detail " + payload["fail"])
        return {"ok": 1.5, "bad": [float("nan"), float("inf")]}
"""
CONFIG = "- kind: api\n  name: p\n  predictor: {type: python, path: predictor.py}\n"


def test_non_finite_numbers_are_sent_as_null_with_a_warning(make_project, serve, caplog) -> None:
    project = make_project({"predictor.py": NAN_PREDICTOR, "cortex.yaml": CONFIG})
    with serve(project) as client:
        response = client.post("/p", json={})
    assert (response.status_code, response.text) == (200, '{"ok":1.5,"bad":[null,null]}')
    assert (
        "the response holds NaN or Infinity, which JSON cannot carry; sent as null: $.bad[0] (nan), $.bad[1] (inf)"
        in caplog.text
    )


def test_hide_errors_keeps_user_text_out_of_500_bodies(make_project, serve) -> None:
    project = make_project({"predictor.py": NAN_PREDICTOR, "cortex.yaml": CONFIG})
    with serve(project) as client:
        shown = client.post("/p", json={"fail": "x"}).json()["error"]
    assert shown == "PythonPredictor.predict raised ValueError: secret detail x"
    with serve(project, ServeOptions(hide_errors=True)) as client:
        response = client.post("/p", json={"fail": "x"}, headers={"X-Request-ID": "r-1"})
    assert (response.status_code, response.json()) == (
        500,
        {
            "error": "Internal error: the server log has the details under this request id (--hide-errors).",
            "request_id": "r-1",
        },
    )


def test_load_failures_shown_to_clients_carry_no_server_paths(make_project, monkeypatch) -> None:
    from starlette.testclient import TestClient

    from localserve.config import load_config
    from localserve.server import create_app

    project = make_project({"cortex.yaml": "- kind: api\n  name: m\n  model: models/missing.onnx\n"})
    monkeypatch.chdir(project)
    app = create_app(load_config(project), ServeOptions(keep_going=True))
    with TestClient(app) as client:
        wait_until(lambda: client.get("/readyz").json()["apis"]["m"]["status"] != "loading", "the load failed")
        ready = client.get("/readyz").json()
        body = client.post("/m", json={}).json()["error"]
    expected = (
        "Model 'models/missing.onnx' not found: models/missing.onnx does not exist "
        "(relative paths start at the project directory .)."
    )
    assert ready == {"status": "not ready", "apis": {"m": {"status": "failed", "error": expected}}}
    assert body == f"api 'm' is not ready: it failed to load: {expected}"


@pytest.mark.slow
def test_replicas_that_crash_before_ready_stop_the_start(make_project) -> None:
    project = make_project({"main.py": "import os\nos._exit(9)\n"})
    with server("--project", str(project), "--handler", "main:handler", "--replicas", "2", ready=False) as (
        _url,
        proc,
    ):
        assert proc.wait(120) == 1
        output = output_of(proc)
    assert "Error: The server stopped: replica " in output
    assert (
        "exited with code 9 before it was ready, 3 times in a row (see the log above: the handler, its imports or the model crash the process)."
        in output
    )
    assert "restarting in 0.5 s" in output and "restarting in 1.0 s" in output
