"""Cortex request handlers over real ONNX models, through the real app."""

from __future__ import annotations

import concurrent.futures
import json
import logging

import numpy as np
import pytest

import localserve.testing
from localserve.config import load_config
from localserve.errors import HandlerLoadError
from localserve.server import create_app
from tests.conftest import EXAMPLES
from tests.models import linear_reference, onnx_linear, onnx_strings, onnx_two_inputs

IRIS = {"sepal_length": 5.2, "sepal_width": 3.6, "petal_length": 1.4, "petal_width": 0.3}


def test_iris_onnx_example_seed_000() -> None:
    with localserve.testing.client(EXAMPLES / "iris_onnx") as client:
        response = client.post("/iris", json=IRIS)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["class_label"] == "iris-setosa"
        assert body["class_index"] == 0
        assert len(body["probabilities"]) == 3 and abs(sum(body["probabilities"]) - 1) < 1e-5
        assert client.post("/iris/predict", json=IRIS).json() == body
        assert client.post("/", json=IRIS).json() == body
        described = client.get("/iris").json()
        assert described["kind"] == "request_handler"
        assert described["model_format"] == "onnx"
        assert described["inputs"][0]["name"] == "input"
        assert described["status"] == "ready"


def test_iris_labels_example_seed_002() -> None:
    sample = json.loads((EXAMPLES / "iris_labels" / "sample.json").read_text())
    with localserve.testing.client(EXAMPLES / "iris_labels") as client:
        response = client.post("/iris-labels", json=sample)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "text/plain; charset=utf-8"
        assert response.text == "iris-virginica"


def test_python_predictor_example_seed_001(localserve_client) -> None:
    client = localserve_client(EXAMPLES / "python_predictor")
    response = client.post("/tax", json={"total_without_tax": 1200})
    assert response.json() == {"total": 1320.0, "currency": "JPY"}


def test_raw_model_and_coercion_errors(serve, make_project) -> None:
    project = make_project({"localserve.yaml": "- kind: api\n  name: lin\n  model: lin.onnx\n"})
    onnx_linear(project / "lin.onnx")
    with serve(project) as client:
        response = client.post("/lin", json=[[1.0, 2.0, 3.0, 4.0]])
        assert response.status_code == 200, response.text
        probabilities, logits = linear_reference([[1.0, 2.0, 3.0, 4.0]])
        assert np.allclose(response.json()[0], probabilities, atol=1e-6)
        assert np.allclose(response.json()[1], logits, atol=1e-5)
        flat = client.post("/lin", json=[1.0, 2.0, 3.0, 4.0])  # reshaped to [-1, 4]
        assert flat.json() == response.json()
        bad = client.post("/lin", json=[1.0, 2.0, 3.0], headers={"X-Request-ID": "q"})
        assert bad.status_code == 400
        assert bad.json() == {
            "error": "Input 'x' expects float32 of shape [-1, 4]; got a list of 3 numbers.",
            "request_id": "q",
        }
        missing = client.post("/lin", json={"y": [1, 2, 3, 4]})
        assert missing.status_code == 400
        assert missing.json()["error"].startswith("Input 'x' is missing")
        assert client.post("/lin", content=b"{", headers={"Content-Type": "application/json"}).status_code == 400


def test_a_lone_surrogate_in_a_string_input_is_a_400_as_on_v2(serve, make_project) -> None:
    project = make_project({"localserve.yaml": "- kind: api\n  name: lower\n  model: strings.onnx\n"})
    onnx_strings(project / "strings.onnx")
    with serve(project) as client:
        assert client.post("/lower", json=["Hello"]).json() == [["hello"]]  # the outputs, in a list
        bad = client.post("/lower", content=b'["Hello", "\\ud800"]', headers={"Content-Type": "application/json"})
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"] == (
            "Input 'text' expects string of shape [-1]; the value '\\ud800' at [1] holds '\\ud800' at 0, a lone "
            "surrogate (half a UTF-16 pair), which UTF-8 cannot carry."
        )


def test_two_argument_and_three_argument_forms_and_metadata(serve, make_project) -> None:
    project = make_project(
        {
            "localserve.yaml": """
            - kind: api
              name: two
              model: two.onnx
              request_handler: two.py
            - kind: api
              name: three
              model: two.onnx
              request_handler: three.py
              metadata: {factor: 10}
            """,
            "two.py": """
            def pre_inference(sample, metadata):
                return {metadata[0].name: sample["ids"], metadata[1].name: sample["scale"]}

            def post_inference(prediction, metadata):
                return {"out": prediction[0].tolist(), "output_name": metadata[0].name}
            """,
            "three.py": """
            def pre_inference(sample, signature, metadata):
                assert signature[0].type == "tensor(int64)"
                return {"ids": sample["ids"], "scale": [[metadata["factor"]]]}

            def post_inference(prediction, signature, metadata):
                return {"out": prediction[0].tolist(), "factor": metadata["factor"]}
            """,
        }
    )
    onnx_two_inputs(project / "two.onnx")
    with serve(project) as client:
        response = client.post("/two", json={"ids": [[1, 2]], "scale": [[0.5]]})
        assert response.json() == {"out": [[0.5, 1.0]], "output_name": "out"}
        response = client.post("/three", json={"ids": [[1, 2]]})
        assert response.json() == {"out": [[10.0, 20.0]], "factor": 10}
        assert client.get("/").status_code == 404  # several APIs: no root route


def test_user_errors_in_hooks_are_500s(serve, make_project) -> None:
    project = make_project(
        {
            "localserve.yaml": "- kind: api\n  name: lin\n  model: lin.onnx\n  request_handler: h.py\n",
            "h.py": "def pre_inference(sample, metadata):\n    return sample['features']\n",
        }
    )
    onnx_linear(project / "lin.onnx")
    with serve(project) as client:
        response = client.post("/lin", json={"oops": 1})
        assert response.status_code == 500
        assert response.json()["error"] == (
            "pre_inference raised KeyError: 'features' (its sample was the body parsed as JSON: a dict with keys 'oops')"
        )
        response = client.post("/lin", json=[1, 2, 3])
        assert response.json()["error"] == (
            "pre_inference raised TypeError: list indices must be integers or slices, not str (its sample was the "
            "body parsed as JSON: a list of 3 items)"
        )


SAMPLE = (EXAMPLES / "iris_onnx" / "sample.json").read_bytes()


@pytest.mark.parametrize(
    ("headers", "body", "status", "error"),
    [
        (  # curl -d @sample.json: curl's default Content-Type
            {"content-type": "application/x-www-form-urlencoded"},
            SAMPLE,
            415,
            "API 'iris' reads a JSON sample, but the body came with Content-Type: application/x-www-form-urlencoded "
            "(curl -d sends that: add -H 'Content-Type: application/json'); send JSON with Content-Type: "
            "application/json (or the bytes with their own type, such as image/jpeg).",
        ),
        (
            {"content-type": "text/plain; charset=utf-8"},
            SAMPLE,
            415,
            "API 'iris' reads a JSON sample, but the body came with Content-Type: text/plain; charset=utf-8; send JSON "
            "with Content-Type: application/json (or the bytes with their own type, such as image/jpeg).",
        ),
        (
            {},
            b"",
            400,
            "API 'iris' reads a JSON sample, but the body is empty (it came with no Content-Type); send JSON with "
            "Content-Type: application/json.",
        ),
        (
            {},
            b"sepal_length=1",
            400,
            "The body is not valid JSON: Expecting value at line 1 column 1 (char 0). It came with no Content-Type; "
            "send JSON with Content-Type: application/json.",
        ),
        (
            {"content-type": "application/json"},
            b"",
            400,
            "API 'iris' reads a JSON sample, but the body is empty (it came with Content-Type: application/json); "
            "send JSON with Content-Type: application/json.",
        ),
    ],
)
def test_a_body_that_is_not_json_is_refused_before_user_code(headers, body, status, error, caplog) -> None:
    """A request handler's sample is the body parsed as JSON (Cortex 0.8-0.11), or the bytes of a binary body (an
    image): a form, text or nothing is the client's 4xx, naming the Content-Type it came with and the one to send,
    and pre_inference never runs on it."""
    with localserve.testing.client(EXAMPLES / "iris_onnx") as client:
        response = client.post("/iris", content=body, headers=headers)
        assert (response.status_code, response.json()["error"]) == (status, error)
        # JSON without a Content-Type (Python's requests with data=json.dumps(...)) is still read as JSON
        assert client.post("/iris", content=SAMPLE).status_code == 200
    assert "pre_inference" not in caplog.text


@pytest.mark.parametrize("example", ["iris_onnx", "iris_labels"])
@pytest.mark.parametrize("sample", [{}, [1, 2], "text", {"sepal_length": "x"}, None])
def test_the_examples_answer_a_sample_they_cannot_use_with_a_400(example, sample) -> None:
    """The bundled request handlers are what users copy: a sample without the features is the client's 400."""
    name = "iris" if example == "iris_onnx" else "iris-labels"
    with localserve.testing.client(EXAMPLES / example) as client:
        response = client.post(f"/{name}", content=json.dumps(sample), headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("Input 'input' expects float32 of shape [-1, 4]; the value ")


def test_a_pre_inference_that_returns_none_is_the_handlers_500(serve, make_project) -> None:
    """The stub of Cortex 0.8-0.9's docs returns nothing; that was a client 400 ("None could not be converted")."""
    project = make_project(
        {
            "localserve.yaml": "- kind: api\n  name: lin\n  model: lin.onnx\n  request_handler: h.py\n",
            "h.py": "def pre_inference(sample, metadata):\n    pass\n",
        }
    )
    onnx_linear(project / "lin.onnx")
    with serve(project) as client:
        response = client.post("/lin", json={"x": [[1, 2, 3, 4]]})
    assert (response.status_code, response.json()["error"]) == (
        500,
        "pre_inference in h.py returned None; it must return the model's input: a dict of input name to value, "
        "or the value of the model's only input.",
    )


def test_debug_logs_each_stage_in_order(serve, make_project, caplog) -> None:
    project = make_project(
        {
            "localserve.yaml": "- kind: api\n  name: lin\n  model: lin.onnx\n  request_handler: h.py\n",
            "h.py": """
            def pre_inference(sample, metadata):
                return sample["x"]

            def post_inference(prediction, metadata):
                return {"p": prediction[0].tolist(), "long": "y" * 600}
            """,
        }
    )
    onnx_linear(project / "lin.onnx")
    caplog.set_level(logging.INFO, logger="localserve")
    with serve(project) as client:
        caplog.clear()
        client.post("/lin?debug=true", json={"x": [0, 0, 0, 0], "pad": list(range(20))})
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("debug:")]
    assert [line.split(":")[1].strip() for line in lines] == [
        "raw sample",
        "after pre_inference",
        "model output",
        "after post_inference",
    ]
    assert "'... 10 more'" in lines[0]
    assert "y" * 500 + "..." in lines[3] and "y" * 501 not in lines[3]


def test_debug_shows_a_deep_body_cut_and_answers_as_without_debug(serve, make_project, caplog) -> None:
    """The client's JSON may nest 1,000 levels: the debug lines show 8 and the request goes on (it was a
    RecursionError, a 500, with ?debug=true alone)."""
    project = make_project(
        {
            "localserve.yaml": "- kind: api\n  name: lin\n  model: lin.onnx\n  request_handler: h.py\n",
            "h.py": """
            def pre_inference(sample, metadata):
                return sample["x"]
            """,
        }
    )
    onnx_linear(project / "lin.onnx")
    body = b'{"x": [0, 0, 0, 0], "deep": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    caplog.set_level(logging.INFO, logger="localserve")
    with serve(project) as client:
        plain = client.post("/lin", content=body, headers={"content-type": "application/json"})
        caplog.clear()
        debugged = client.post("/lin?debug=true", content=body, headers={"content-type": "application/json"})
    assert plain.status_code == debugged.status_code == 200
    assert debugged.content == plain.content
    raw = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("debug: raw sample"))
    assert "'deep': [[[[[[[[...]]]]]]]]" in raw


def test_batching_merges_concurrent_requests(serve, make_project) -> None:
    project = make_project(
        {
            "localserve.yaml": """
            - kind: api
              name: lin
              model: lin.onnx
              request_handler: h.py
              batching: {max_batch_size: 8, batch_interval: 200ms}
              threads_per_process: 1
            """,
            "h.py": """
            import threading
            sizes = []

            def pre_inference(sample, metadata):
                return sample["x"]

            def post_inference(prediction, metadata):
                return {"p": prediction[0].tolist(), "n": len(prediction[0])}
            """,
        }
    )
    onnx_linear(project / "lin.onnx")
    with serve(project) as client:
        inputs = [[[float(i), 0, 0, 0]] for i in range(8)] + [[[1.0, 2.0, 3.0]]]  # the last cannot be stacked
        with concurrent.futures.ThreadPoolExecutor(9) as pool:
            responses = list(pool.map(lambda x: client.post("/lin", json={"x": x}), inputs))
    for x, response in zip(inputs[:8], responses[:8], strict=False):
        assert response.status_code == 200, response.text
        assert np.allclose(response.json()["p"], linear_reference(x)[0], atol=1e-6)
        assert response.json()["n"] == 1
    assert responses[8].status_code == 400  # exact batch sizes: tests/engine/test_pipeline.py


def test_load_errors_name_the_problem(make_project, monkeypatch) -> None:
    import asyncio

    project = make_project(
        {
            "localserve.yaml": "- kind: api\n  name: lin\n  model: lin.onnx\n  request_handler: h.py\n",
            "h.py": "def pre_inference(sample):\n    return sample\n",
        }
    )
    onnx_linear(project / "lin.onnx")
    monkeypatch.chdir(project)
    app = create_app(load_config(project))
    with pytest.raises(HandlerLoadError) as info:
        asyncio.run(app.startup(wait=True))
    assert str(info.value) == (
        "h.py: pre_inference must take (sample, metadata) or (sample, signature, metadata); it takes 1 parameter(s)."
    )
    asyncio.run(app.shutdown.finish())


def test_a_model_with_a_fixed_batch_size_still_answers_each_batched_request(serve, make_project) -> None:
    project = make_project(
        {
            "localserve.yaml": """
            - kind: api
              name: fixed
              model: fixed.onnx
              batching: {max_batch_size: 8, batch_interval: 200ms}
            """
        }
    )
    onnx_linear(project / "fixed.onnx", symbolic_batch=False, fixed_batch=1)
    inputs = [[[float(i), 1.0, 2.0, 3.0]] for i in range(6)]
    with serve(project) as client, concurrent.futures.ThreadPoolExecutor(6) as pool:
        responses = list(pool.map(lambda x: client.post("/fixed", json=x), inputs))
    # (that a refused stacked run falls back to each feed alone: tests/engine/test_batcher.py)
    for x, response in zip(inputs, responses, strict=True):
        assert response.status_code == 200, response.text
        assert np.allclose(response.json()[0], linear_reference(x)[0], atol=1e-6)
