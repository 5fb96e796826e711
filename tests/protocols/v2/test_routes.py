"""The Open Inference Protocol, driven by the unmodified tritonclient against a real server on a free port.

One server serves iris (the example's ONNX model behind a request handler), mlp (a 256-1024-1024-10
ONNX MLP with batching) and echo (an ABEJA handler, which V2 does not serve). Results are checked
against onnxruntime running the same model files directly, and against the native route.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import json
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnxruntime
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from tests.conftest import EXAMPLES, triton_http, wait_until
from tests.models import ECHO_HANDLER, onnx_batch_echo, onnx_mlp
from tests.test_e2e import server

pytestmark = pytest.mark.slow

CONFIG = """\
- kind: api
  name: iris
  model: iris.onnx
  request_handler: handler.py
- kind: api
  name: mlp
  model: mlp.onnx
  batching: {max_batch_size: 8, batch_interval: 1ms}
- kind: api
  name: echo
  handler: echo:handler
"""


def v2_project(root: Path) -> Path:
    root.mkdir()
    (root / "cortex.yaml").write_text(CONFIG)
    shutil.copy(EXAMPLES / "iris_onnx" / "iris.onnx", root / "iris.onnx")
    shutil.copy(EXAMPLES / "iris_onnx" / "handler.py", root / "handler.py")
    shutil.copy(EXAMPLES / "multipart_echo" / "main.py", root / "echo.py")
    onnx_mlp(root / "mlp.onnx")
    return root


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    project = v2_project(tmp_path_factory.mktemp("v2") / "project")
    with server(cwd=project) as (url, _):
        yield url, project


@pytest.fixture
def client(running: tuple[str, Path]) -> Iterator[triton.InferenceServerClient]:
    url, _ = running
    with triton_http(url) as triton_client:
        yield triton_client


def reference(project: Path, model: str, x: np.ndarray) -> list[np.ndarray]:
    """The outputs of onnxruntime on the same model file."""
    session = onnxruntime.InferenceSession(str(project / f"{model}.onnx"), providers=["CPUExecutionProvider"])
    return list(session.run(None, {session.get_inputs()[0].name: x}))


def test_health_and_metadata(client: triton.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("iris") and client.is_model_ready("mlp")
    server_metadata = client.get_server_metadata()
    assert server_metadata["name"] == "localserve"
    assert server_metadata["extensions"] == ["binary_tensor_data", "model_configuration", "statistics"]
    assert client.get_model_metadata("iris") == {
        "name": "iris",
        "versions": ["1"],
        "platform": "onnxruntime_onnx",
        "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]}],
    }
    assert client.get_model_metadata("iris", "1") == client.get_model_metadata("iris")
    config = client.get_model_config("mlp")
    assert (config["platform"], config["max_batch_size"]) == ("onnxruntime_onnx", 8)
    assert config["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [256]}]
    assert config["output"] == [{"name": "y", "data_type": "TYPE_FP32", "dims": [10]}]
    # iris does not batch, but its first dimension is free: Triton's auto-completed configuration
    iris = client.get_model_config("iris")
    assert (iris["max_batch_size"], "dynamic_batching" in iris) == (4, False)
    assert iris["input"] == [{"name": "input", "data_type": "TYPE_FP32", "dims": [4]}]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_iris_infer_feeds_the_model_directly(
    client: triton.InferenceServerClient, running: tuple[str, Path], binary: bool
) -> None:
    url, project = running
    x = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], dtype=np.float32)
    given = triton.InferInput("input", list(x.shape), "FP32")
    given.set_data_from_numpy(x, binary_data=binary)
    wanted = triton.InferRequestedOutput("probabilities", binary_data=binary)
    result = client.infer("iris", [given], outputs=[wanted], request_id="req-1")
    (expected,) = reference(project, "iris", x)
    np.testing.assert_array_equal(result.as_numpy("probabilities"), expected)
    assert result.get_response()["id"] == "req-1"
    # the native route runs pre_inference/post_inference around the same model: same probabilities
    sample = dict(zip(["sepal_length", "sepal_width", "petal_length", "petal_width"], x[0].tolist(), strict=True))
    native = httpx.post(f"{url}/iris", json=sample).json()
    np.testing.assert_allclose(native["probabilities"], expected[0], rtol=1e-6)


@pytest.mark.parametrize(
    ("binary", "compression"),
    [(True, None), (False, None), (True, "gzip"), (False, "deflate")],
    ids=["binary", "json", "binary-gzip", "json-deflate"],
)
def test_mlp_infer_matches_onnxruntime(
    client: triton.InferenceServerClient, running: tuple[str, Path], binary: bool, compression: str | None
) -> None:
    _, project = running
    x = np.random.default_rng(1).standard_normal((3, 256)).astype(np.float32)
    given = triton.InferInput("x", [3, 256], "FP32")
    given.set_data_from_numpy(x, binary_data=binary)
    # compressed: tritonclient's request_compression_algorithm, decoded as Triton does
    result = client.infer(
        "mlp",
        [given],
        outputs=[triton.InferRequestedOutput("y", binary_data=binary)],
        request_compression_algorithm=compression,
    )
    (expected,) = reference(project, "mlp", x)
    np.testing.assert_allclose(result.as_numpy("y"), expected, rtol=1e-5, atol=1e-6)
    # no outputs named: every output comes back (tritonclient then asks for binary data)
    everything = client.infer("mlp", [given], request_compression_algorithm=compression)
    assert [o["name"] for o in everything.get_response()["outputs"]] == ["y"]
    np.testing.assert_allclose(everything.as_numpy("y"), expected, rtol=1e-5, atol=1e-6)


def triton_error(call: Any) -> tuple[str | None, str]:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value.status(), caught.value.message()


def test_errors_are_json_with_the_right_status(client: triton.InferenceServerClient) -> None:
    x = triton.InferInput("input", [1, 4], "FP64")
    x.set_data_from_numpy(np.zeros((1, 4)))
    assert triton_error(lambda: client.infer("iris", [x])) == (
        "400",
        "Input 'input' has datatype 'FP64'; the model expects FP32 for it.",
    )
    x = triton.InferInput("input", [1, 5], "FP32")
    x.set_data_from_numpy(np.zeros((1, 5), dtype=np.float32))
    assert triton_error(lambda: client.infer("iris", [x])) == (
        "400",
        "Input 'input' has shape [1, 5]; the model expects [-1, 4] (-1: any size).",
    )
    x = triton.InferInput("features", [1, 4], "FP32")
    x.set_data_from_numpy(np.zeros((1, 4), dtype=np.float32))
    assert triton_error(lambda: client.infer("iris", [x])) == (
        "400",
        "Unknown input 'features'; the model expects 'input' (FP32 [-1, 4]).",
    )
    assert triton_error(lambda: client.get_model_metadata("nope")) == (
        "404",
        "No model 'nope'; the models served over the Open Inference Protocol are: 'iris', 'mlp'.",
    )
    assert triton_error(lambda: client.get_model_metadata("iris", "2")) == (
        "404",
        "Model 'iris' has no version '2'; localserve serves version 1 only.",
    )
    assert triton_error(lambda: client.get_model_metadata("echo")) == (
        "404",
        "API 'echo' is an ABEJA handler, which takes requests, not tensors; the Open Inference Protocol serves only "
        "APIs whose ONNX or TensorFlow model localserve runs itself. Use its own route (/echo).",
    )
    assert not client.is_model_ready("echo")


def test_hostile_bodies_are_400s_and_the_server_keeps_serving(running: tuple[str, Path]) -> None:
    url, _ = running
    header = json.dumps(
        {"inputs": [{"name": "x", "shape": [2**62, 2**62], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]}
    ).encode()
    cases = [
        (b"-1", header + b"\0" * 8, "Inference-Header-Content-Length '-1' is not a byte count"),
        (str(10**30).encode(), header + b"\0" * 8, "Inference-Header-Content-Length '1000000000000000000000000000000'"),
        (
            str(len(header) + 9).encode(),
            header + b"\0" * 8,
            f"Inference-Header-Content-Length {len(header) + 9} is past",
        ),
        (
            str(len(header)).encode(),
            header + b"\0" * 8,
            "Input 'x' has shape [4611686018427387904, 4611686018427387904]",
        ),
    ]
    for length, body, start in cases:
        response = httpx.post(
            f"{url}/v2/models/mlp/infer",
            content=body,
            headers={"Inference-Header-Content-Length": length.decode(), "Content-Type": "application/octet-stream"},
        )
        assert response.status_code == 400, response.text
        assert list(response.json()) == ["error"]
        assert response.json()["error"].startswith(start), response.json()
    good = {"inputs": [{"name": "x", "shape": [1, 256], "datatype": "FP32", "data": [0.5] * 256}]}
    assert httpx.post(f"{url}/v2/models/mlp/infer", json=good).status_code == 200


def test_stats_count_v2_requests_with_the_native_ones(client: triton.InferenceServerClient) -> None:
    before = client.get_inference_statistics("mlp")["model_stats"][0]
    x = triton.InferInput("x", [2, 256], "FP32")
    x.set_data_from_numpy(np.ones((2, 256), dtype=np.float32))
    client.infer("mlp", [x])
    bad = triton.InferInput("x", [2, 256], "FP64")
    bad.set_data_from_numpy(np.ones((2, 256)))
    with pytest.raises(InferenceServerException):
        client.infer("mlp", [bad])
    after = client.get_inference_statistics("mlp")["model_stats"][0]
    assert (after["name"], after["version"]) == ("mlp", "1")
    stats, was = after["inference_stats"], before["inference_stats"]
    assert stats["success"]["count"] == was["success"]["count"] + 1
    assert stats["fail"]["count"] == was["fail"]["count"] + 1
    assert after["execution_count"] == before["execution_count"] + 1
    assert after["inference_count"] == before["inference_count"] + 2  # rows the model ran
    assert stats["compute_infer"]["ns"] > was["compute_infer"]["ns"]
    everything = client.get_inference_statistics()["model_stats"]
    assert [s["name"] for s in everything] == ["iris", "mlp"]


# -- V2 and native requests share the engine (in process: the batch is made deterministic) ----------

ECHO_CONFIG = """
- kind: api
  name: echo
  model: echo.onnx
  request_handler: h.py
  batching: {max_batch_size: 8, batch_interval: 10s}
"""


def v2_echo_body(row: list[float]) -> tuple[bytes, dict[str, str]]:
    given = triton.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(np.array([row], dtype=np.float32), binary_data=True)
    body, length = triton.InferenceServerClient.generate_request_body([given])
    return bytes(body), {"Inference-Header-Content-Length": str(length)}


def test_v2_and_native_requests_run_in_one_batch(serve, make_project) -> None:

    project = make_project({"cortex.yaml": ECHO_CONFIG, "h.py": ECHO_HANDLER})
    onnx_batch_echo(project / "echo.onnx")
    rows = [[float(i), 1.0, 2.0, 3.0] for i in range(1, 7)]
    with serve(project) as client:
        import h

        pool = concurrent.futures.ThreadPoolExecutor(8)
        first = pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0] * 4]})
        assert h.started.wait(10)
        futures = []
        for i, row in enumerate(rows):
            if i % 2:
                futures.append(pool.submit(client.post, "/echo", json={"x": [row]}))
            else:
                body, headers = v2_echo_body(row)
                futures.append(pool.submit(client.post, "/v2/models/echo/infer", content=body, headers=headers))
        pipeline = client.app.apis["echo"].pipeline
        wait_until(lambda: pipeline.queue.depth == len(rows), "the requests queued")
        h.release.set()
        responses = [f.result(30) for f in futures]
        assert first.result(30).status_code == 200
        metrics = client.get("/metrics").text
        pool.shutdown()
    seen = set()
    for i, (row, response) in enumerate(zip(rows, responses, strict=True)):
        assert response.status_code == 200, response.text
        if i % 2:
            y = np.asarray(response.json()["y"])
        else:
            length = int(response.headers["inference-header-content-length"])
            y = triton.InferenceServerClient.parse_response_body(response.content, header_length=length).as_numpy("y")
        seen |= set((y - np.asarray([row])).ravel().tolist())
    assert seen == {8.0}  # 7 rows padded to 8, all in one model call
    assert sample(metrics, "localserve_batch_size_count", api="echo") == 1  # one model call for 7 requests
    assert sample(metrics, "localserve_requests_total", api="echo", code="200") == 7  # V2 requests counted too


def sample(text: str, name: str, **labels: str) -> float:
    """The sum of the samples ``name`` whose labels include ``labels``, in Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and labels.items() <= s.labels.items()
    )


# -- every V2 response against the protocol's own OpenAPI document (tests/specs/open_inference_rest.yaml) ------

SPEC = Path(__file__).resolve().parents[2] / "specs" / "open_inference_rest.yaml"


def check(value: Any, schema_name: str, *, binary_outputs: bool = False) -> None:
    """Validate ``value`` against a schema of the spec; with ``binary_outputs`` an output may carry
    ``parameters.binary_data_size`` in place of ``data`` (the binary tensor data extension)."""
    import copy

    import yaml
    from openapi_schema_validator import OAS30Validator

    components = copy.deepcopy(yaml.safe_load(SPEC.read_text())["components"])
    if binary_outputs:
        output = components["schemas"]["response_output"]
        output["required"].remove("data")
        output["anyOf"] = [
            {"required": ["data"]},
            {"required": ["parameters"], "properties": {"parameters": {"required": ["binary_data_size"]}}},
        ]
    OAS30Validator({"$ref": f"#/components/schemas/{schema_name}", "components": components}).validate(value)


def test_every_v2_response_fits_the_open_inference_protocol_spec(running: tuple[str, Path]) -> None:
    url, _ = running
    with httpx.Client(base_url=url) as http:
        assert http.get("/v2/health/live").status_code == 200
        assert http.get("/v2/health/ready").status_code == 200
        assert http.get("/v2/models/mlp/ready").status_code == 200
        assert http.get("/v2/models/mlp/versions/1/ready").status_code == 200
        check(http.get("/v2").json(), "metadata_server_response")
        for path in ("/v2/models/iris", "/v2/models/mlp", "/v2/models/mlp/versions/1"):
            check(http.get(path).json(), "metadata_model_response")
        x = {"name": "x", "shape": [2, 256], "datatype": "FP32", "data": [[0.25] * 256, [0.5] * 256]}
        response = http.post("/v2/models/mlp/infer", json={"id": "a", "inputs": [x]})
        assert response.status_code == 200 and response.headers["content-type"] == "application/json"
        check(response.json(), "inference_response")
        response = http.post("/v2/models/mlp/versions/1/infer", json={"inputs": [x], "outputs": [{"name": "y"}]})
        check(response.json(), "inference_response")
        binary = {"inputs": [x], "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}
        response = http.post("/v2/models/mlp/infer", json=binary)
        length = int(response.headers["inference-header-content-length"])
        header = json.loads(response.content[:length])
        check(header, "inference_response", binary_outputs=True)
        assert len(response.content) - length == header["outputs"][0]["parameters"]["binary_data_size"] == 2 * 10 * 4
        for status, response in [
            (400, http.post("/v2/models/mlp/infer", json={"inputs": [{**x, "datatype": "FP16"}]})),
            (400, http.post("/v2/models/mlp/infer", content=b"{")),
            (404, http.post("/v2/models/nope/infer", json={"inputs": [x]})),
            (404, http.post("/v2/models/echo/infer", json={"inputs": [x]})),
        ]:
            assert response.status_code == status, response.text
            check(response.json(), "inference_error_response")
        for path in ("/v2/models/nope", "/v2/models/mlp/versions/9", "/v2/models/echo/config"):
            response = http.get(path)
            assert response.status_code == 404
            check(response.json(), "metadata_model_error_response")


# -- TensorFlow: outputs by name, BYTES kept as bytes for the model ---------------------------------------------

TF_CONFIG = """
- kind: api
  name: linear
  model: model
  model_format: tensorflow
- kind: api
  name: text
  model: model
  model_format: tensorflow
  tf_signature_key: text
"""


def triton_post(client: Any, path: str, inputs: list[Any], outputs: list[Any] | None = None) -> Any:
    body, length = triton.InferenceServerClient.generate_request_body(inputs, outputs)
    headers = {} if length is None else {"Inference-Header-Content-Length": str(length)}
    response = client.post(path, content=bytes(body), headers=headers)
    assert response.status_code == 200, response.text
    header_length = response.headers.get("inference-header-content-length")
    return triton.InferenceServerClient.parse_response_body(
        response.content, header_length=None if header_length is None else int(header_length)
    )


def test_tensorflow_savedmodels_are_v2_models(serve, make_project) -> None:
    from tests.models import linear_reference, tf_savedmodel

    project = make_project({"cortex.yaml": TF_CONFIG})
    tf_savedmodel(project / "model")
    with serve(project) as client:
        metadata = client.get("/v2/models/text").json()
        assert metadata == {
            "name": "text",
            "versions": ["1"],
            "platform": "tensorflow_savedmodel",
            "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
            "outputs": [
                {"name": "length", "datatype": "INT32", "shape": [-1]},
                {"name": "upper", "datatype": "BYTES", "shape": [-1]},
            ],
        }
        words = np.array(["héllo", "wörld", ""], dtype=object)
        for binary in (True, False):
            given = triton.InferInput("text", [3], "BYTES")
            given.set_data_from_numpy(words, binary_data=binary)
            wanted = [triton.InferRequestedOutput(n, binary_data=binary) for n in ("upper", "length")]
            result = triton_post(client, "/v2/models/text/infer", [given], wanted)
            upper = [v.decode() if isinstance(v, bytes) else v for v in result.as_numpy("upper").tolist()]
            assert upper == ["HéLLO", "WöRLD", ""]  # tf.strings.upper changes ASCII only
            assert result.as_numpy("length").tolist() == [len(w.encode()) for w in words]
        x = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
        given = triton.InferInput("x", [1, 4], "FP32")
        given.set_data_from_numpy(x)
        result = triton_post(client, "/v2/models/linear/infer", [given])
        probabilities, logits = linear_reference(x)
        np.testing.assert_allclose(result.as_numpy("probabilities"), probabilities, rtol=1e-5)
        assert result.as_numpy("label").tolist() == logits.argmax(axis=1).tolist()


def test_a_model_that_failed_to_load_answers_503(make_project, monkeypatch) -> None:

    from starlette.testclient import TestClient

    from localserve.config import load_config
    from localserve.server import ServeOptions, create_app

    project = make_project({"cortex.yaml": "- {kind: api, name: broken, model: missing.onnx}\n"})
    monkeypatch.chdir(project)
    app = create_app(load_config(project), ServeOptions(keep_going=True))
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_until(lambda: app.apis["broken"].state != "loading", "the load failed")
        body = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]}
        for response in (
            client.get("/v2/models/broken"),
            client.get("/v2/models/broken/ready"),
            client.post("/v2/models/broken/infer", json=body),
        ):
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            assert response.json() == {
                "error": "api 'broken' is not ready: it failed to load: Model 'missing.onnx' not found: missing.onnx "
                "does not exist (relative paths start at the project directory .)."
            }
        assert client.get("/v2/health/ready").status_code == 503
        assert client.get("/v2/health/live").status_code == 200


def test_a_coding_other_than_gzip_or_deflate_is_a_415(running: tuple[str, Path]) -> None:
    url, _ = running
    good = json.dumps({"inputs": [{"name": "x", "shape": [1, 256], "datatype": "FP32", "data": [0.5] * 256}]})
    response = httpx.post(f"{url}/v2/models/mlp/infer", content=good, headers={"Content-Encoding": "br"})
    assert (response.status_code, response.json()["error"]) == (
        415,
        "Content-Encoding 'br' is not supported here; send the body with gzip, deflate or no encoding.",
    )
    cut = gzip.compress(good.encode())[:-12]
    response = httpx.post(f"{url}/v2/models/mlp/infer", content=cut, headers={"Content-Encoding": "gzip"})
    assert (response.status_code, response.json()["error"]) == (
        400,
        "The gzip body ends before its compressed stream does (Content-Encoding: gzip).",
    )


def test_decoding_stops_at_the_body_limit() -> None:
    from localserve.errors import RequestError
    from localserve.protocols.bodies import decode_content

    def decode(body: bytes, coding: bytes, limit: int) -> bytes:
        return asyncio.run(decode_content(body, coding, limit))

    bomb = gzip.compress(b"\0" * 10_000)
    assert decode(bomb, b"GZIP", 10_000) == b"\0" * 10_000
    with pytest.raises(RequestError) as info:
        decode(bomb, b"gzip", 9_999)
    assert info.value.status_code == 413
    assert str(info.value) == (
        f"The request body decompresses to more than 9999 bytes (--max-body-size); {len(bomb)} bytes were sent with "
        "Content-Encoding gzip."
    )
    with pytest.raises(RequestError) as info:
        decode(b"not zlib", b"deflate", 100)
    assert str(info.value) == (
        "The body is not valid deflate data (Content-Encoding: deflate): Error -3 while decompressing data: "
        "incorrect header check."
    )
    assert decode(b"as is", b"identity", 100) == b"as is"


def test_a_body_is_inflated_in_steps_and_data_after_the_first_gzip_member_is_a_400() -> None:
    from localserve.errors import RequestError
    from localserve.protocols.bodies import decode_content

    big = bytes(range(256)) * (12 * 1024)  # 3 MiB: the first step on the loop, then three off it
    assert asyncio.run(decode_content(gzip.compress(big), b"gzip", 4 * 1024 * 1024)) == big
    assert asyncio.run(decode_content(zlib.compress(big), b"deflate", len(big))) == big
    with pytest.raises(RequestError) as info:
        asyncio.run(decode_content(gzip.compress(big) + gzip.compress(b"more"), b"gzip", 4 * 1024 * 1024))
    assert (info.value.status_code, str(info.value)) == (
        400,
        f"The gzip body has {len(gzip.compress(b'more'))} bytes after the end of its compressed stream (a second gzip "
        "member, or junk); send one stream (Content-Encoding: gzip).",
    )
    with pytest.raises(RequestError) as info:
        asyncio.run(decode_content(gzip.compress(big)[:5000], b"gzip", 4 * 1024 * 1024))
    assert (info.value.status_code, str(info.value)) == (
        400,
        "The gzip body ends before its compressed stream does (Content-Encoding: gzip).",
    )
