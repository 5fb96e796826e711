"""``GET /metrics`` as scrapers read it: promtool's lint on every family, OpenMetrics, gzip, the process's figures.

promtool, Prometheus's own linter, runs as its own process (skipped where it is not installed)."""

from __future__ import annotations

import gzip
import shutil
import subprocess

import httpx
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

from tests.conftest import wait_until
from tests.metrics.test_observability import PREDICTOR, TRACKED, samples
from tests.test_e2e import server, wait_loaded

PROMTOOL = shutil.which("promtool")  # Debian's `prometheus` package; .ci/install-system-deps installs it
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian package prometheus)")

JOBS = """
- kind: AsyncAPI
  name: jobs
  predictor: {type: python, path: predictor.py}
"""
USER_METRICS = """
class PythonPredictor:
    def __init__(self, config, metrics_client):
        self.metrics = metrics_client

    def predict(self, payload):
        self.metrics.gauge("temperature_celsius", 21.5, tags={"room": "a"})
        self.metrics.increment("predictions", tags={"kind": "x"})
        self.metrics.increment("errors_total")
        self.metrics.histogram("confidence_ratio", 0.5)
        return payload
"""
USER = """
- kind: api
  name: user
  predictor: {type: python, path: user.py}
"""


def promtool(text: str) -> tuple[int, str]:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    return done.returncode, (done.stdout + done.stderr).decode()


def every_kind_of_family(client: httpx.Client) -> None:
    for label in ("setosa", "virginica"):
        assert client.post("/classify", json={"label": label}).status_code == 200
    for value in (1.0, -4.0):
        assert client.post("/regress", json=value).status_code == 200
    assert client.post("/user", json=1).status_code == 200
    assert client.post("/regress", json="not a number").status_code == 200
    assert client.post("/classify", json={}).status_code == 500


@needs_promtool
def test_every_family_passes_promtool(serve, make_project) -> None:
    project = make_project(
        {"localserve.yaml": TRACKED + USER + JOBS, "predictor.py": PREDICTOR, "user.py": USER_METRICS}
    )
    with serve(project) as client:
        every_kind_of_family(client)
        assert client.post("/jobs", json="x").status_code == 200
        text = client.get("/metrics").text
    assert promtool(text) == (0, "")
    names = {name for name, _ in samples(text)}
    assert {"localserve_tracker_sum_of_values", "localserve_async_jobs", "localserve_user_predictions_total"} <= names
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "python_info"} <= names
    assert [name for name in names if name.endswith("_created")] == []
    assert 'localserve_requests_total{api="classify",code="500"} 1.0' in text


def test_openmetrics_when_asked_and_gzip_when_accepted(serve, make_project) -> None:
    project = make_project({"localserve.yaml": TRACKED, "predictor.py": PREDICTOR})
    with serve(project) as client:
        assert client.post("/classify", json={"label": "setosa"}).status_code == 200
        plain = client.get("/metrics", headers={"Accept-Encoding": "identity"})
        assert plain.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "content-encoding" not in plain.headers
        assert plain.headers["vary"] == "Accept, Accept-Encoding"
        open_metrics = client.get(
            "/metrics",
            headers={
                "Accept": "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
                "Accept-Encoding": "gzip",
            },
        )
        assert open_metrics.headers["content-type"] == (
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
        )
        assert open_metrics.headers["content-encoding"] == "gzip"
        with client.stream("GET", "/metrics", headers={"Accept-Encoding": "gzip"}) as raw:
            assert raw.headers["content-encoding"] == "gzip"
            body = b"".join(raw.iter_raw())
    assert gzip.decompress(body).startswith(b"# HELP ")
    assert open_metrics.text.endswith("# EOF\n")
    families = {family.name: family for family in openmetrics_families(open_metrics.text)}
    [setosa] = [s for s in families["localserve_tracker_class"].samples if s.labels.get("class") == "setosa"]
    assert (setosa.name, setosa.value) == ("localserve_tracker_class_total", 1.0)
    assert "localserve_requests_total" not in families  # OpenMetrics names a counter's family without _total


@pytest.mark.slow
@needs_promtool
def test_with_replicas_every_family_passes_promtool_and_each_replica_has_its_process_figures(make_project) -> None:
    project = make_project({"localserve.yaml": TRACKED + USER, "predictor.py": PREDICTOR, "user.py": USER_METRICS})
    with server("--replicas", "2", cwd=project) as (url, proc), httpx.Client(base_url=url) as client:
        wait_loaded(proc, ["classify", "regress", "user"], 2)
        every_kind_of_family(client)

        def replica_pids() -> set[str]:
            text = client.get("/metrics").text
            return {dict(labels)["pid"] for name, labels in samples(text) if name == "process_resident_memory_bytes"}

        wait_until(lambda: len(replica_pids()) == 2, "both replicas' process figures")
        text = client.get("/metrics").text
    assert promtool(text) == (0, "")
    assert [name for name, _ in samples(text) if name.endswith("_created")] == []
