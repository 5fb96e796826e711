"""Metrics, stats and the tracker through the real app; logs, readiness and `get` with real processes.

The real processes are for what only a process shows: the JSON lines it writes to its stderr while it loads,
/readyz before its APIs are loaded, and its exit status when a load fails."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

import localserve.testing
from localserve.cli import main
from tests.conftest import EXAMPLES, wait_until
from tests.test_e2e import output_of, server

TRACKED = """
- kind: api
  name: classify
  predictor: {type: python, path: predictor.py}
  tracker: {key: label, model_type: classification}
- kind: api
  name: regress
  predictor: {type: python, path: predictor.py}
  tracker: {model_type: regression}
"""
PREDICTOR = """
import os, time
from localserve import logger


class PythonPredictor:
    def __init__(self, config, metrics_client):
        self.metrics = metrics_client
        deadline = time.monotonic() + 120  # with a gate, loading lasts until the test creates it
        while config.get("gate") and not os.path.exists(config["gate"]) and time.monotonic() < deadline:
            time.sleep(0.01)

    def predict(self, payload, request_id):
        logger.info("predicting", extra={"payload": payload, "message": "ignored"})
        print("printed while predicting")
        self.metrics.increment("predictions", tags={"kind": type(payload).__name__})
        if payload == "boom":
            raise ValueError("boom")
        if isinstance(payload, dict):
            return {"label": payload["label"]}
        return payload
"""


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_exactly() -> None:
    with localserve.testing.client(EXAMPLES / "json_tax", handler="main:handler") as client:
        for _ in range(3):
            assert client.post("/", json={"total_without_tax": 1}).status_code == 200
        for _ in range(2):
            assert client.post("/", json={}).status_code == 400
        scraped = samples(client.get("/metrics").text)
    api = (("api", "json-tax"),)
    assert scraped[("localserve_requests_total", (("api", "json-tax"), ("code", "200")))] == 3
    assert scraped[("localserve_requests_total", (("api", "json-tax"), ("code", "400")))] == 2
    assert scraped[("localserve_request_duration_seconds_count", api)] == 5
    assert scraped[("localserve_stage_duration_seconds_count", (("api", "json-tax"), ("stage", "handler")))] == 5
    assert scraped[("localserve_requests_in_flight", api)] == 0
    assert scraped[("localserve_queue_depth", api)] == 0
    assert scraped[("localserve_model_load_seconds", api)] > 0


def test_tracker_stats_and_user_metrics(serve, make_project) -> None:
    project = make_project({"localserve.yaml": TRACKED, "predictor.py": PREDICTOR})
    with serve(project) as client:
        for label in ("setosa", "setosa", "virginica"):
            client.post("/classify", json={"label": label})
        client.post("/classify", json={"label": 1.5})  # wrong type: a warning, still a 200
        client.post("/classify", json="boom")  # 500: not tracked
        for value in (1.0, 4.0, 2.5):
            client.post("/regress", json=value)
        client.post("/regress", json="not a number")
        stats = client.get("/classify/stats").json()
        assert stats["api"] == "classify" and stats["status"] == "ready"
        assert stats["requests"] == {"2xx": 4, "4xx": 0, "5xx": 1}
        assert stats["tracker"]["classes"] == {"setosa": 2, "virginica": 1}
        regress = client.get("/regress/stats").json()["tracker"]
        assert {k: regress[k] for k in ("count", "min", "max", "mean")} == {
            "count": 3,
            "min": 1.0,
            "max": 4.0,
            "mean": 2.5,
        }
        assert regress["histogram"] == [[0.5, 1.0, 1], [2.0, 5.0, 2]]  # fixed bins (lower, upper], non-empty ones
        assert [entry["api"] for entry in client.get("/stats").json()] == ["classify", "regress"]
        scraped = samples(client.get("/metrics").text)
        assert scraped[("localserve_user_predictions_total", (("api", "classify"), ("kind", "dict")))] == 4
        assert scraped[("localserve_stage_duration_seconds_count", (("api", "regress"), ("stage", "predict")))] == 4
    # the tracker on /metrics: the same figures as /stats
    classify, regress_ = (("api", "classify"),), (("api", "regress"),)
    assert scraped[("localserve_tracker_class_total", (*classify, ("class", "setosa")))] == 2
    assert scraped[("localserve_tracker_class_total", (*classify, ("class", "virginica")))] == 1
    assert scraped[("localserve_tracker_value_bucket", (*regress_, ("le", "0.5")))] == 0
    assert scraped[("localserve_tracker_value_bucket", (*regress_, ("le", "1.0")))] == 1
    assert scraped[("localserve_tracker_value_bucket", (*regress_, ("le", "2.0")))] == 1
    assert scraped[("localserve_tracker_value_bucket", (*regress_, ("le", "5.0")))] == 3
    assert scraped[("localserve_tracker_value_bucket", (*regress_, ("le", "+Inf")))] == 3
    assert [scraped[(f"localserve_tracker_value_{figure}", regress_)] for figure in ("min", "max", "count")] == [
        1,
        4,
        3,
    ]
    assert scraped[("localserve_tracker_sum_of_values", regress_)] == 7.5


@pytest.mark.slow
def readyz(url: str) -> httpx.Response | None:
    """The server's ``/readyz``, or None while it does not listen yet."""
    try:
        return httpx.get(f"{url}/readyz")
    except httpx.TransportError:
        return None


def test_get_json_logs_and_readiness_with_a_real_server(make_project, tmp_path) -> None:
    gate = tmp_path / "loaded"
    yaml = TRACKED.replace(
        "predictor: {type: python, path: predictor.py}\n  tracker: {key",
        f"predictor: {{type: python, path: predictor.py, config: {{gate: {str(gate)!r}}}}}\n  tracker: {{key",
        1,
    )
    project = make_project({"localserve.yaml": yaml, "predictor.py": PREDICTOR})
    with server("-p", str(project), "--log-format", "json", ready=False) as (url, proc):
        wait_until(lambda: (r := readyz(url)) is not None and r.status_code == 503, "the server answering, loading")
        ready = readyz(url)
        assert ready is not None and ready.status_code == 503
        assert ready.json()["apis"]["classify"] == {"status": "loading"}  # held until the gate is made
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert httpx.post(f"{url}/classify", json={"label": "x"}).status_code == 503
        gate.touch()
        wait_until(lambda: (r := readyz(url)) is not None and r.status_code == 200, "the server ready")
        for label in ("setosa", "setosa", "versicolor"):
            httpx.post(f"{url}/classify", json={"label": label}, headers={"X-Request-ID": f"req-{label}"})
        httpx.post(f"{url}/classify", json="boom")
        done = CliRunner().invoke(main, ["get", "--url", url], catch_exceptions=False)
        assert done.exit_code == 0, done.output
        text = done.stdout
        lines = text.splitlines()
        assert lines[0].split() == ["api", "status", "2xx", "4xx", "5xx", "mean", "p50", "p99"]
        assert lines[1].split()[:5] == ["classify", "ready", "3", "0", "2"]  # the 503 while loading, and "boom"
        assert lines[2].split()[:5] == ["regress", "ready", "0", "0", "0"]
        assert "classify: classification of 'label', 3 predictions" in text
        assert any(line.split()[:3] == ["setosa", "2", "66.7%"] for line in lines)
        as_json = CliRunner().invoke(main, ["get", "classify", "--url", url, "--json"], catch_exceptions=False)
        assert json.loads(as_json.stdout)["tracker"]["classes"] == {"setosa": 2, "versicolor": 1}
    records = [json.loads(line) for line in output_of(proc).splitlines() if line.startswith("{")]
    access = [r for r in records if r.get("request_id") == "req-versicolor" and r.get("path") == "/classify"]
    assert access and access[0]["status"] == 200 and access[0]["method"] == "POST" and access[0]["api"] == "classify"
    user = [r for r in records if r["message"] == "predicting" and r.get("request_id") == "req-setosa"]
    assert user and user[0]["payload"] == {"label": "setosa"} and user[0]["api"] == "classify"
    assert user[0]["extra_message"] == "ignored"
    printed = [r for r in records if r["message"] == "printed while predicting" and r.get("request_id") == "req-setosa"]
    assert printed and printed[0]["api"] == "classify"
    assert {"asctime", "levelname", "message", "process"} <= set(user[0])
    failed = [r for r in records if r["levelname"] == "ERROR" and "boom" in r["message"]]
    assert failed and "Traceback" in failed[0]["message"] + failed[0].get("exception", "")
    assert any("classify" in r["message"] and "loaded in" in r["message"] for r in records)


@pytest.mark.slow
def test_a_failed_load_stops_the_start_unless_keep_going(make_project) -> None:
    project = make_project(
        {
            "localserve.yaml": TRACKED,
            "predictor.py": "class PythonPredictor:\n    def __init__(self, config):\n        raise RuntimeError('no vocabulary file')\n\n    def predict(self, payload):\n        pass\n",
        }
    )
    with server("-p", str(project), ready=False) as (url, proc):
        assert proc.wait(30) == 1
        assert (
            "Error: The server stopped: PythonPredictor.__init__ raised RuntimeError: no vocabulary file"
            in output_of(proc)
        )
    with server("-p", str(project), "--keep-going", ready=False) as (url, proc):
        wait_until(
            lambda: (r := readyz(url)) is not None and r.json()["apis"]["classify"]["status"] == "failed",
            "the load failed",
        )
        ready = readyz(url)
        assert ready is not None and ready.status_code == 503
        assert (
            ready.json()["apis"]["classify"]["error"]
            == "PythonPredictor.__init__ raised RuntimeError: no vocabulary file"
        )
        response = httpx.post(f"{url}/classify", json={})
        assert response.status_code == 503
        assert response.json()["error"] == (
            "api 'classify' is not ready: it failed to load: PythonPredictor.__init__ raised RuntimeError: no vocabulary file"
        )
