"""Cortex's ``post_predict``: after the answer is sent, on the API's threads, with the arguments it declares."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from localserve.config import load_config
from localserve.errors import HandlerLoadError
from localserve.server import create_app
from tests.conftest import wait_until
from tests.handlers.test_predictor import project_with
from tests.models import linear_reference, onnx_linear

GATED = """
import threading

entered = threading.Event()
release = threading.Event()
done = threading.Event()
calls = []
threads = []

class PythonPredictor:
    def __init__(self, config):
        pass

    def predict(self, payload):
        threads.append(threading.current_thread().name)
        return {"doubled": payload["x"] * 2}

    def post_predict(self, response, query_params):  # only these two: anything more would be a TypeError
        entered.set()
        assert release.wait(120)  # the bound only catches a hang
        calls.append((response, dict(query_params)))
        threads.append(threading.current_thread().name)
        done.set()
"""


def test_post_predict_runs_after_the_answer_with_only_its_declared_arguments(serve, make_project) -> None:
    project = project_with(make_project, GATED)
    with serve(project) as client:
        import predictor

        response = client.post("/pred?tag=a", json={"x": 21})
        # The client holds the whole answer while post_predict is still held at its gate.
        assert (response.status_code, response.json()) == (200, {"doubled": 42})
        assert predictor.entered.wait(60)
        assert predictor.calls == [] and not predictor.done.is_set()
        predictor.release.set()
        assert predictor.done.wait(60)
        assert predictor.calls == [({"doubled": 42}, {"tag": "a"})]
        # On the API's own thread, as predict (Cortex's request thread pool).
        assert predictor.threads == ["localserve-pred-0", "localserve-pred-0"]


def test_post_predict_failure_is_logged_and_counted_never_sent(serve, make_project, caplog) -> None:
    project = project_with(
        make_project,
        """
        class PythonPredictor:
            def __init__(self, config):
                self.seen = []

            def predict(self, payload):
                return {"ok": payload}

            def post_predict(self, payload, headers, response):
                self.seen.append(headers["x-thing"])
                raise ValueError(f"audit store is down for {payload}")
        """,
    )
    caplog.set_level(logging.ERROR, logger="localserve")
    with serve(project) as client:
        response = client.post("/pred", json=7, headers={"X-Request-ID": "r-1", "X-Thing": "t"})
        assert (response.status_code, response.json()) == (200, {"ok": 7})
        metric = 'localserve_post_predict_failures_total{api="pred"} 1.0'
        wait_until(lambda: metric in client.get("/metrics").text, "the failure counted")
        second = client.post("/pred", json=8)
        assert second.status_code == 200
        wait_until(lambda: 'failures_total{api="pred"} 2.0' in client.get("/metrics").text, "the second counted")
    lines = [r.getMessage() for r in caplog.records if "after the reply" in r.getMessage()]
    assert lines[0].startswith(
        "request r-1 to api 'pred': after the reply: PythonPredictor.post_predict raised ValueError: "
        "audit store is down for 7\nTraceback"
    )


def test_onnx_predictor_post_predict_gets_the_prediction(serve, make_project) -> None:
    project = project_with(
        make_project,
        """
        import threading
        seen = []
        done = threading.Event()

        class ONNXPredictor:
            def __init__(self, onnx_client, config):
                self.client = onnx_client

            def predict(self, payload):
                probabilities, logits = self.client.predict({"x": payload})
                return {"probabilities": probabilities.tolist()}

            def post_predict(self):
                seen.append("called with nothing")
                done.set()
        """,
        type="onnx",
        model="model_path: lin.onnx",
    )
    onnx_linear(project / "lin.onnx")
    with serve(project) as client:
        response = client.post("/pred", json=[[1, 2, 3, 4]])
        assert np.allclose(response.json()["probabilities"], linear_reference([[1, 2, 3, 4]])[0], atol=1e-6)
        import predictor

        assert predictor.done.wait(60)
        assert predictor.seen == ["called with nothing"]


def test_post_predict_with_batching_is_called_once_per_request(serve, make_project) -> None:
    project = project_with(
        make_project,
        """
        import threading
        seen = []
        two = threading.Event()

        class PythonPredictor:
            def __init__(self, config):
                pass

            def predict(self, payload):
                return [p + 1 for p in payload]

            def post_predict(self, response, payload):
                seen.append((payload, response))
                if len(seen) == 2:
                    two.set()
        """,
        extra="batching: {max_batch_size: 2, batch_interval: 1ms}",
    )
    with serve(project) as client:
        assert client.post("/pred", json=1).json() == 2
        assert client.post("/pred", json=10).json() == 11
        import predictor

        assert predictor.two.wait(60)
        assert sorted(predictor.seen) == [(1, 2), (10, 11)]


def test_post_predict_with_an_unknown_parameter_is_refused_at_load(make_project) -> None:
    project = project_with(
        make_project,
        """
        class PythonPredictor:
            def __init__(self, config):
                pass

            def predict(self, payload):
                return payload

            def post_predict(self, response, request_id):
                pass
        """,
    )
    app = create_app(load_config(project))
    with pytest.raises(HandlerLoadError) as info:
        app.apis["pred"].endpoint.load()
    assert str(info.value) == (
        "predictor.py: PythonPredictor.post_predict has an unknown parameter 'request_id'; "
        "it may take: response, payload, query_params, headers."
    )
