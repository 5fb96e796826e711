"""The dashboard's data (``GET /dashboard/data``) and the bounds of its polling, through the real app."""

from __future__ import annotations

import json
from typing import Any

from localserve.server import ServeOptions
from tests.conftest import EXAMPLES
from tests.server.test_pages import ECHO, SAMPLE, pages_project


def figures_of(data: dict[str, Any], api: str) -> dict[str, Any]:
    return next(entry for entry in data["apis"] if entry["name"] == api)


def test_dashboard_data_comes_from_the_metrics(make_project, serve) -> None:
    with serve(pages_project(make_project)) as client:
        for _ in range(3):
            assert client.post("/iris", json=SAMPLE).status_code == 200
        assert client.post("/iris", json=[1, 2]).status_code == 500  # pre_inference raises on a list
        assert client.post("/two", json={"ids": [[1, 2]]}).status_code == 400
        assert client.post("/echo", files={"file": ("a.txt", b"abc")}).status_code == 200
        metrics = client.get("/metrics").text
        data = client.get("/dashboard/data").json()
        page = client.get("/dashboard")
        script = client.get("/dashboard/dashboard.js")
    assert page.status_code == 200 and '<script src="dashboard/dashboard.js"></script>' in page.text
    assert "https://" not in page.text + script.text
    assert data["metrics"] is True
    iris = figures_of(data, "iris")
    assert {k: iris[k] for k in ("name", "kind", "status", "error", "model_format", "gpu", "batching")} == {
        "name": "iris",
        "kind": "request_handler",
        "status": "ready",
        "error": None,
        "model_format": "onnx",
        "gpu": False,
        "batching": 4,
    }
    assert iris["device"] == "CPUExecutionProvider"
    assert iris["figures"]["codes"] == {"200": 3.0, "500": 1.0}
    assert iris["figures"]["latency"]["count"] == 4.0
    assert iris["figures"]["latency"]["buckets"][-1] == [None, 4.0]  # +Inf, cumulative
    # one request at a time: three model calls of one row each (the request whose pre_inference
    # raised never reached the model)
    assert iris["figures"]["batch_size"]["buckets"][:2] == [[1.0, 3.0], [2.0, 3.0]]
    assert 'localserve_batch_size_bucket{api="iris",le="1.0"} 3.0' in metrics
    assert figures_of(data, "two")["figures"]["batch_size"]["count"] == 0.0  # no batching: not counted
    assert iris["tracker"] == {"model_type": "classification", "key": "class_label", "classes": {"iris-setosa": 3}}
    assert figures_of(data, "two")["figures"]["codes"] == {"400": 1.0}
    echo = figures_of(data, "echo")
    assert (echo["figures"]["codes"], echo["device"], echo["tracker"]) == ({"200": 1.0}, None, None)
    # the same figures as the text of /metrics
    assert 'localserve_requests_total{api="iris",code="200"} 3.0' in metrics
    assert 'localserve_request_duration_seconds_count{api="iris"} 4.0' in metrics


def test_dashboard_without_metrics_says_so(make_project, serve) -> None:
    project = make_project({"main.py": ECHO})
    with serve(project, ServeOptions(metrics=False), handler="main:handler") as client:
        data = client.get("/dashboard/data").json()
    assert data["metrics"] is False
    assert [(a["name"], a["status"], a["figures"]) for a in data["apis"]] == [("proj", "ready", None)]


def test_the_dashboard_data_has_each_traffic_splitter(serve) -> None:
    """``/dashboard/data`` carries a TrafficSplitter's ``/stats`` entry: its APIs' weights and requests, its shadow."""
    sample = json.loads((EXAMPLES / "iris_splitter" / "sample.json").read_text())
    with serve(EXAMPLES / "iris_splitter") as client:
        for _ in range(5):
            assert client.post("/iris", json=sample).status_code == 200
        client.portal.call(client.app.splitters.drain)  # the shadow's copies are answered
        data = client.get("/dashboard/data").json()
        stats = client.get("/iris/stats").json()
    assert [api["name"] for api in data["apis"]] == ["iris-onnx", "iris-rules", "iris-candidate"]
    assert data["splitters"] == [stats]
    (split,) = data["splitters"]
    assert {name: target["weight"] for name, target in split["targets"].items()} == {"iris-onnx": 80, "iris-rules": 20}
    assert sum(target["requests"]["2xx"] for target in split["targets"].values()) == 5
    assert split["shadow"] == {"api": "iris-candidate", "weight": 100, "answered": 5, "failed": 0, "dropped": 0}


def test_the_dashboards_interval_is_refused_outside_a_tenth_of_a_second_to_an_hour(make_project, serve) -> None:
    project = make_project({"main.py": ECHO})
    with serve(project, handler="main:handler") as client:
        answers = {
            query: client.get(f"/dashboard?{query}")
            for query in ("interval=0.001", "interval=-1", "interval=nan", "interval=1e10", "interval=2&interval=0.09")
        }
        assert client.get("/dashboard?interval=0.1").status_code == 200
        assert client.get("/dashboard?interval=3600").status_code == 200
    assert {query: (a.status_code, a.json()["error"]) for query, a in answers.items()} == {
        query: (400, f"?interval={value} is not a number of seconds from 0.1 to 3600 (between polls).")
        for query, value in [
            ("interval=0.001", "0.001"),
            ("interval=-1", "-1"),
            ("interval=nan", "nan"),
            ("interval=1e10", "1e10"),
            ("interval=2&interval=0.09", "0.09"),
        ]
    }
