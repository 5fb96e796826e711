"""Cortex predictors through the real app: parameters by name, clients, return types (batching: test_lists.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import localserve.testing
from localserve.config import load_config
from localserve.errors import HandlerLoadError
from localserve.server import create_app
from tests.conftest import EXAMPLES
from tests.models import linear_reference, onnx_linear

PREDICTOR_YAML = """
- kind: api
  name: pred
  predictor:
    type: {type}
    path: predictor.py
    {model}
    config: {{greeting: hi}}
  {extra}
"""


def project_with(make_project, code: str, *, type: str = "python", model: str = "", extra: str = ""):
    yaml = PREDICTOR_YAML.format(type=type, model=model, extra=extra)
    return make_project({"localserve.yaml": yaml, "predictor.py": code})


def test_parameters_are_passed_by_name(serve, make_project) -> None:
    project = project_with(
        make_project,
        """
        class PythonPredictor:
            def __init__(self, config, metrics_client):
                self.config = config
                metrics_client.put("loaded", 1)

            def predict(self, payload, headers, request_id, query_params):
                return {"payload": payload, "greeting": self.config["greeting"], "id": request_id,
                        "q": query_params, "h": headers["X-Thing"]}
        """,
    )
    with serve(project) as client:
        response = client.post("/pred?a=1", json={"k": "v"}, headers={"X-Request-ID": "rid", "X-Thing": "t"})
        assert response.json() == {"payload": {"k": "v"}, "greeting": "hi", "id": "rid", "q": {"a": "1"}, "h": "t"}
        assert (
            client.post("/pred", content=b"hello", headers={"Content-Type": "text/plain"}).json()["payload"] == "hello"
        )


def test_metrics_client_takes_cortex_calls_and_refuses_its_prefixes(serve, make_project) -> None:
    project = project_with(
        make_project,
        """
        class PythonPredictor:
            def __init__(self, config, metrics_client):
                self.metrics = metrics_client

            def predict(self, payload):
                self.metrics.gauge(metric=payload, value=2, tags={"protocol": "http"})
                self.metrics.increment(metric="calls", tags={"model_version": "v1"})
                self.metrics.histogram("time_ms", 120)
                return "ok"
        """,
    )
    with serve(project) as client:
        assert client.post("/pred", json="active").text == "ok"
        refused = client.post("/pred", json="cortex_active")
        assert (refused.status_code, refused.json()["error"]) == (
            500,
            "PythonPredictor.predict raised ValueError: Metric name (cortex_active) is invalid because it starts "
            "with a cortex exclusive prefix.\nThe following are prefixes are exclusive to cortex: "
            "('cortex_', 'istio_').",
        )
        body = client.get("/metrics").text
    assert 'localserve_user_active{api="pred",protocol="http"} 2.0' in body
    assert 'localserve_user_calls_total{api="pred",model_version="v1"} 1.0' in body
    assert 'localserve_user_time_ms_count{api="pred"} 1.0' in body


def test_return_types(serve, make_project) -> None:
    project = project_with(
        make_project,
        """
        import numpy as np
        from starlette.responses import FileResponse, PlainTextResponse, Response

        class PythonPredictor:
            def __init__(self, config):
                pass

            def predict(self, payload):
                if payload == "exit":
                    raise SystemExit(3)
                if payload == "status 1000":
                    return Response(status_code=1000)
                if payload == "line break":
                    return Response("x", headers={"x-a": "a\\r\\nb"})
                if payload == "no file":
                    return FileResponse("/nonexistent/file.bin")
                return {
                    "str": "text", "bytes": b"\\x00\\x01", "array": np.arange(3), "number": np.float32(1.5),
                    "response": PlainTextResponse("custom", status_code=201), "bad": object(),
                }[payload]
        """,
    )
    with serve(project) as client:

        def ask(kind: str):
            return client.post("/pred", json=kind)

        assert (ask("str").text, ask("str").headers["content-type"]) == ("text", "text/plain; charset=utf-8")
        assert (ask("bytes").content, ask("bytes").headers["content-type"]) == (b"\x00\x01", "application/octet-stream")
        assert ask("array").json() == [0, 1, 2]
        assert ask("number").json() == 1.5
        assert (ask("response").status_code, ask("response").text) == (201, "custom")
        bad = ask("bad")
        assert bad.status_code == 500
        assert (
            bad.json()["error"]
            == "The response cannot be serialised as JSON: Object of type object is not JSON serializable."
        )
        # A returned Response that uvicorn would drop the connection on, or that fails to send: a JSON 500.
        assert ask("status 1000").json()["error"] == "The returned Response has status_code 1000; expected 200 to 599."
        assert ask("line break").json()["error"] == (
            "The returned Response's header 'x-a' contains a line break or control character."
        )
        no_file = ask("no file")
        assert no_file.status_code == 500 and no_file.json()["error"].startswith(
            "Sending the returned FileResponse failed: RuntimeError: File at path /nonexistent/file.bin does not exist."
        )
        assert no_file.headers["x-request-id"] == no_file.json()["request_id"]
        exit_ = ask("exit")  # named as the predictor's, not as an internal error
        assert (exit_.status_code, exit_.json()["error"]) == (500, "PythonPredictor.predict raised SystemExit: 3")
        import msgpack

        packed = client.post("/pred", json="array", headers={"Accept": "application/msgpack"})
        assert msgpack.unpackb(packed.content) == [0, 1, 2]


def test_onnx_predictor_uses_the_client(serve, make_project) -> None:
    project = project_with(
        make_project,
        """
        class ONNXPredictor:
            def __init__(self, onnx_client, config):
                self.client = onnx_client

            def predict(self, payload):
                probabilities, logits = self.client.predict({"x": payload})
                return {"probabilities": probabilities.tolist()}
        """,
        type="onnx",
        model="model_path: lin.onnx",
    )
    onnx_linear(project / "lin.onnx")
    with serve(project) as client:
        response = client.post("/pred", json=[[1, 2, 3, 4]])
        assert np.allclose(response.json()["probabilities"], linear_reference([[1, 2, 3, 4]])[0], atol=1e-6)
        assert (
            client.post("/pred", json=[1, 2]).json()["error"]
            == "Input 'x' expects float32 of shape [-1, 4]; got a list of 2 numbers."
        )
        assert client.get("/pred").json()["inputs"][0]["name"] == "x"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "class PythonPredictor:\n    def __init__(self, config, tensorflow_client):\n        pass\n    def predict(self, payload):\n        pass\n",
            "predictor.py: PythonPredictor.__init__ has an unknown parameter 'tensorflow_client'; it may take: config, metrics_client.",
        ),
        (
            "class PythonPredictor:\n    def __init__(self, config):\n        pass\n    def predict(self, payload, body):\n        pass\n",
            "predictor.py: PythonPredictor.predict has an unknown parameter 'body'; it may take: payload, request_id, query_params, headers.",
        ),
        (
            "class Predictor:\n    pass\n",
            "predictor.py: no class PythonPredictor (predictor type 'python'); it defines: Predictor.",
        ),
        (
            "class PythonPredictor:\n    def __init__(self, config):\n        raise RuntimeError('no vocabulary')\n    def predict(self):\n        pass\n",
            "PythonPredictor.__init__ raised RuntimeError: no vocabulary",
        ),
        (  # on the API's thread a KeyboardInterrupt is the code's own, not Ctrl-C: the API fails to load
            "class PythonPredictor:\n    def __init__(self, config):\n        raise KeyboardInterrupt\n    def predict(self):\n        pass\n",
            "PythonPredictor.__init__ raised KeyboardInterrupt: ",
        ),
    ],
)
def test_load_errors(make_project, monkeypatch, code: str, message: str) -> None:
    project = project_with(make_project, code)
    monkeypatch.chdir(project)
    app = create_app(load_config(project))
    with pytest.raises(HandlerLoadError) as info:
        asyncio.run(app.startup(wait=True))
    assert str(info.value) == message
    asyncio.run(app.shutdown.finish())


@pytest.mark.parametrize(
    ("example", "route", "error"),
    [
        ("python_predictor", "/tax", 'send a JSON object with a number "total_without_tax"'),
        ("iris_models", "/iris-models", 'send a JSON object with "input" (4 numbers), and "model", "version"'),
    ],
)
@pytest.mark.parametrize("payload", [{}, [1], "text", {"total_without_tax": "1200"}])
def test_the_example_predictors_answer_a_payload_they_cannot_use_with_a_400(example, route, error, payload) -> None:
    """The bundled predictors are what users copy: a payload they cannot use is the client's 400, not a 500."""
    with localserve.testing.client(EXAMPLES / example) as client:
        response = client.post(route, json=payload)
    assert (response.status_code, response.json()) == (400, {"error": error})


KEYED = "class PythonPredictor:\n    def __init__(self, config):\n        pass\n\n    def predict(self, payload):\n"


def _indexing_error() -> str:
    """What this Python says of ``"hi"["total"]`` (3.11 added ", not 'str'")."""
    text: Any = "hi"
    try:
        _ = text["total"]
    except TypeError as exc:
        return f"TypeError: {exc}"
    raise AssertionError("indexing a str with a str did not raise")


NOT_STR = _indexing_error()


@pytest.mark.parametrize(
    ("headers", "body", "error", "how"),
    [
        (  # curl -d @sample.json: the JSON file arrives as a form whose one field is the whole text
            {"content-type": "application/x-www-form-urlencoded"},
            b'{"total": 1}',
            "KeyError: 'total'",
            "the body read as a form (application/x-www-form-urlencoded): fields '{\"total\": 1}'; JSON is read as "
            "JSON only with Content-Type: application/json",
        ),
        ({"content-type": "text/plain"}, b"hi", NOT_STR, "the body read as text (text/plain): 2 characters"),
        (
            {},
            b"hi",
            "TypeError: byte indices must be integers or slices, not str",
            "the body as bytes (2 bytes; it came with no Content-Type)",
        ),
        (
            {"content-type": "application/json"},
            b'{"a": 1}',
            "KeyError: 'total'",
            "the body parsed as JSON: a dict with keys 'a'",
        ),
    ],
)
def test_a_predict_failing_on_its_payload_says_how_the_body_was_read(make_project, headers, body, error, how) -> None:
    project = project_with(make_project, KEYED + "        return {'total': payload['total']}\n")
    with localserve.testing.client(project) as client:
        response = client.post("/pred", content=body, headers=headers)
    assert (response.status_code, response.json()["error"]) == (
        500,
        f"PythonPredictor.predict raised {error} (its payload was {how})",
    )


def test_an_error_user_code_raises_on_purpose_is_shown_as_it_is(make_project) -> None:
    project = project_with(make_project, KEYED + "        raise ValueError('no stock')\n")
    with localserve.testing.client(project) as client:
        response = client.post("/pred", json={})
    assert response.json()["error"] == "PythonPredictor.predict raised ValueError: no stock"
