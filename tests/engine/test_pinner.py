"""When a replica's request threads are pinned to one core by default: a model API on CPU with one thread whose
requests prove short; not with longer requests, two threads, an ABEJA handler, or in a Kubernetes pod.
Through the real app in-process; what a thread runs on is read from ``os.sched_getaffinity`` in user code."""

from __future__ import annotations

import os

import pytest

from localserve.engine.pinner import PIN_BELOW
from localserve.engine.pipeline import Pipeline
from localserve.server import ServeOptions
from tests.conftest import wait_until as wait_for
from tests.models import onnx_identity

AFFINITY_HANDLER = """
import os
import time

def pre_inference(sample, metadata):
    start = time.thread_time()
    while time.thread_time() - start < sample.get("cpu", 0):  # CPU work on the API's thread
        pass
    return sample["x"]

def post_inference(prediction, metadata):
    return {"cpus": sorted(os.sched_getaffinity(0))}
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning is off on one core")
@pytest.mark.parametrize(
    ("threads", "cpu", "pinned"),
    [(1, 0.0, True), (1, 0.003, False), (2, 0.0, False)],
    ids=["short-requests", "long-requests", "two-threads"],
)
def test_a_model_api_with_one_thread_and_short_requests_is_pinned_by_default(
    serve, make_project, monkeypatch, threads, cpu, pinned
) -> None:
    """No --pin-threads flag (``pin_threads=None``): a model API on CPU with one thread measures the CPU a
    request takes on its thread and pins the loop and the thread to one core (replica 0 on port 0: the
    first allowed core) when that is under ``PIN_BELOW``; requests that take longer (a JPEG decoded in
    pre_inference) and APIs with two threads keep every core."""
    monkeypatch.setattr(Pipeline, "MEASURE_AFTER", 2)
    monkeypatch.setattr(Pipeline, "MEASURE_JOBS", 6)
    config = f"- kind: api\n  name: m\n  model: m.onnx\n  request_handler: h.py\n  threads_per_process: {threads}\n"
    project = make_project({"localserve.yaml": config, "h.py": AFFINITY_HANDLER})
    onnx_identity(project / "m.onnx")
    body = {"x": [[1.0, 2.0, 3.0, 4.0]], "cpu": cpu}
    with serve(project, ServeOptions(pin_threads=None)) as client:
        app = client.app
        assert app.engine.pinner.by_default() is (threads == 1)
        for _ in range(8):  # the measured requests
            assert client.post("/m", json=body).status_code == 200
        if threads == 1:
            wait_for(lambda: "m" in app.engine.pinner.request_cpu, "the request's CPU measured")
            assert (app.engine.pinner.request_cpu["m"] < PIN_BELOW) is pinned
        else:
            assert app.engine.pinner.request_cpu == {}
        cpus = client.post("/m", json=body).json()["cpus"]
    allowed = sorted(os.sched_getaffinity(0))
    assert cpus == (allowed[:1] if pinned else allowed)


def test_a_model_api_in_a_kubernetes_pod_is_not_pinned_by_default(serve, make_project, monkeypatch) -> None:
    """Every pod of a node sees the node's cores and would pick the same one: off in a pod."""
    config = "- kind: api\n  name: m\n  model: m.onnx\n  request_handler: h.py\n"
    project = make_project({"localserve.yaml": config, "h.py": AFFINITY_HANDLER})
    onnx_identity(project / "m.onnx")
    with serve(project, ServeOptions(pin_threads=None, on_kubernetes=True)) as client:
        assert client.app.engine.pinner.by_default() is False
        cpus = client.post("/m", json={"x": [[1.0, 2.0, 3.0, 4.0]]}).json()["cpus"]
    assert cpus == sorted(os.sched_getaffinity(0))


def test_a_handler_api_is_not_pinned_by_default(serve, make_project) -> None:
    """An ABEJA handler may start thread pools of its own later: without the flag it keeps every core."""
    project = make_project({"main.py": "def handler(request, context):\n    return {'content': 'ok'}\n"})
    with serve(project, ServeOptions(pin_threads=None), handler="main:handler") as client:
        assert client.app.engine.pinner.by_default() is False
