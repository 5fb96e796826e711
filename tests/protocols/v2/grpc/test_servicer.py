"""The Open Inference Protocol over gRPC, driven by the unmodified tritonclient.grpc against a real server.

One ``localserve serve --grpc-port`` process serves iris (the example's ONNX model behind a request
handler), mlp (a 256-1024-1024-10 MLP with batching), linear (two outputs), half (FP16), flags (BOOL),
words (strings) and echo (an ABEJA handler, which V2 does not serve). Results are compared with
onnxruntime running the same files, and errors with what the REST routes say for the same mistake.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import onnxruntime
import pytest
import tritonclient.grpc as triton
from onnx import TensorProto
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.conftest import EXAMPLES, cli_env, free_port
from tests.models import onnx_identity, onnx_linear, onnx_mlp, onnx_strings
from tests.protocols.v2.test_routes import sample
from tests.test_e2e import output_of, server

pytestmark = pytest.mark.slow

MAX_BODY = 64 * 1024
CONFIG = """\
- {kind: api, name: iris, model: iris.onnx, request_handler: handler.py}
- {kind: api, name: mlp, model: mlp.onnx, batching: {max_batch_size: 8, batch_interval: 1ms}}
- {kind: api, name: linear, model: linear.onnx}
- {kind: api, name: half, model: half.onnx}
- {kind: api, name: flags, model: flags.onnx}
- {kind: api, name: words, model: words.onnx}
- {kind: api, name: echo, handler: echo:handler}
"""


def grpc_project(root: Path) -> Path:
    root.mkdir()
    (root / "cortex.yaml").write_text(CONFIG)
    shutil.copy(EXAMPLES / "iris_onnx" / "iris.onnx", root / "iris.onnx")
    shutil.copy(EXAMPLES / "iris_onnx" / "handler.py", root / "handler.py")
    shutil.copy(EXAMPLES / "multipart_echo" / "main.py", root / "echo.py")
    onnx_mlp(root / "mlp.onnx")
    onnx_linear(root / "linear.onnx")
    onnx_identity(root / "half.onnx", TensorProto.FLOAT16, ("batch", 3))
    onnx_identity(root / "flags.onnx", TensorProto.BOOL, ("batch", 2))
    onnx_strings(root / "words.onnx")
    return root


class Running:
    def __init__(self, url: str, target: str, project: Path) -> None:
        self.url, self.target, self.project = url, target, project


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    project = grpc_project(tmp_path_factory.mktemp("grpc") / "project")
    port = free_port()
    with server("--grpc-port", str(port), "--max-body-size", str(MAX_BODY), cwd=project) as (url, _):
        yield Running(url, f"127.0.0.1:{port}", project)


@pytest.fixture
def client(running: Running) -> Iterator[triton.InferenceServerClient]:
    triton_client = triton.InferenceServerClient(running.target)
    yield triton_client
    triton_client.close()


@pytest.fixture
def stub(running: Running) -> Iterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    """tritonclient's own generated stub, for what its InferInput cannot send: typed contents."""
    with grpc.insecure_channel(running.target) as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


def reference(project: Path, model: str, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(str(project / f"{model}.onnx"), providers=["CPUExecutionProvider"])
    return list(session.run(None, feed))


def tensor(name: str, array: np.ndarray, datatype: str) -> triton.InferInput:
    given = triton.InferInput(name, list(array.shape), datatype)
    given.set_data_from_numpy(array)
    return given


def grpc_error(call: Any) -> tuple[str | None, str]:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value.status(), caught.value.message()


def test_health_metadata_and_config_are_those_of_rest(client: triton.InferenceServerClient, running: Running) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("iris") and client.is_model_ready("mlp", "1")
    assert client.get_server_metadata(as_json=True) == {
        "name": "localserve",
        "version": httpx.get(f"{running.url}/v2").json()["version"],
        "extensions": ["model_configuration", "statistics"],
    }
    for name in ("iris", "mlp", "half", "words"):
        metadata = client.get_model_metadata(name)
        rest = httpx.get(f"{running.url}/v2/models/{name}").json()
        assert (metadata.name, list(metadata.versions), metadata.platform) == (rest["name"], ["1"], "onnxruntime_onnx")
        for given, expected in [(metadata.inputs, rest["inputs"]), (metadata.outputs, rest["outputs"])]:
            assert [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in given] == expected
    config = client.get_model_config("mlp").config
    assert (config.name, config.platform, config.backend, config.max_batch_size) == (
        "mlp",
        "onnxruntime_onnx",
        "onnxruntime",
        8,
    )
    assert (config.input[0].name, config.input[0].data_type, list(config.input[0].dims)) == ("x", 11, [256])  # FP32
    assert (config.output[0].name, list(config.output[0].dims)) == ("y", [10])
    assert config.WhichOneof("scheduling_choice") == "dynamic_batching"
    assert config.version_policy.latest.num_versions == 1
    iris = client.get_model_config("iris").config
    assert (iris.max_batch_size, list(iris.input[0].dims)) == (4, [4])  # no batching, a free first dimension: as Triton
    assert iris.WhichOneof("scheduling_choice") is None
    assert client.get_model_config("words").config.input[0].data_type == 13  # TYPE_STRING


def test_the_repository_index_is_that_of_rest(
    client: triton.InferenceServerClient, stub: Any, running: Running
) -> None:
    rest = httpx.post(f"{running.url}/v2/repository/index").json()
    assert [entry["name"] for entry in rest] == ["iris", "mlp", "linear", "half", "flags", "words"]
    index = client.get_model_repository_index(as_json=True)["models"]
    assert index == [{"name": e["name"], "version": e["version"], "state": e["state"]} for e in rest]
    ready = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True)).models
    assert [entry.name for entry in ready] == [entry["name"] for entry in index]  # every model is ready


def test_a_batch_past_max_batch_size_is_refused_naming_both(
    client: triton.InferenceServerClient, running: Running
) -> None:
    rows = np.ones((10, 4), dtype=np.float32)
    assert client.get_model_config("iris").config.max_batch_size == 4
    message = (
        "The request has a batch of 10 rows, over model 'iris''s max_batch_size of 4 (its configuration, GET "
        "/v2/models/iris/config); send at most 4 rows per request."
    )
    assert grpc_error(lambda: client.infer("iris", [tensor("input", rows, "FP32")])) == (
        "StatusCode.INVALID_ARGUMENT",
        message,
    )
    body = {"inputs": [{"name": "input", "shape": [10, 4], "datatype": "FP32", "data": rows.ravel().tolist()}]}
    assert rest_error(running, "iris", body) == (400, message)
    result = client.infer("iris", [tensor("input", rows[:4], "FP32")])  # up to max_batch_size: served
    assert result.as_numpy("probabilities").shape == (4, 3)


def test_raw_contents_match_onnxruntime(client: triton.InferenceServerClient, running: Running) -> None:
    x = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], dtype=np.float32)
    result = client.infer("iris", [tensor("input", x, "FP32")], request_id="req-1")
    (expected,) = reference(running.project, "iris", {"input": x})
    np.testing.assert_array_equal(result.as_numpy("probabilities"), expected)
    assert result.get_response().id == "req-1"
    assert (result.get_response().model_name, result.get_response().model_version) == ("iris", "1")

    x = np.random.default_rng(1).standard_normal((3, 256)).astype(np.float32)
    result = client.infer("mlp", [tensor("x", x, "FP32")], model_version="1")
    np.testing.assert_allclose(result.as_numpy("y"), reference(running.project, "mlp", {"x": x})[0], rtol=1e-5)

    halves = np.array([[0.5, -1.25, 65504.0], [1e-3, 0.0, -0.0]], dtype=np.float16)
    np.testing.assert_array_equal(client.infer("half", [tensor("x", halves, "FP16")]).as_numpy("y"), halves)
    flags = np.array([[True, False], [False, True]])
    assert client.infer("flags", [tensor("x", flags, "BOOL")]).as_numpy("y").tolist() == flags.tolist()
    words = np.array(["Hello", "WORLD", "ÉTÉ"], dtype=object)
    (expected,) = reference(running.project, "words", {"text": words})
    assert client.infer("words", [tensor("text", words, "BYTES")]).as_numpy("normalized").tolist() == [
        word.encode() for word in expected
    ]
    assert expected.tolist()[:2] == ["hello", "world"]


def test_requested_outputs_only_come_back(client: triton.InferenceServerClient, running: Running) -> None:
    x = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    probabilities, logits = reference(running.project, "linear", {"x": x})
    both = client.infer("linear", [tensor("x", x, "FP32")])
    assert [o.name for o in both.get_response().outputs] == ["probabilities", "logits"]
    one = client.infer("linear", [tensor("x", x, "FP32")], outputs=[triton.InferRequestedOutput("logits")])
    assert [o.name for o in one.get_response().outputs] == ["logits"]
    np.testing.assert_array_equal(one.as_numpy("logits"), logits)
    np.testing.assert_array_equal(both.as_numpy("probabilities"), probabilities)


def typed_request(model: str, name: str, datatype: str, shape: list[int]) -> Any:
    request = service_pb2.ModelInferRequest(model_name=model, id="typed")
    return request, request.inputs.add(name=name, datatype=datatype, shape=shape)


def test_typed_contents_are_answered_typed(stub: Any, running: Running) -> None:
    x = np.random.default_rng(2).standard_normal((2, 256)).astype(np.float32)
    request, given = typed_request("mlp", "x", "FP32", [2, 256])
    given.contents.fp32_contents.extend(x.ravel().tolist())
    response = stub.ModelInfer(request)
    assert (response.id, list(response.raw_output_contents)) == ("typed", [])
    (y,) = response.outputs
    assert (y.name, y.datatype, list(y.shape)) == ("y", "FP32", [2, 10])
    expected = reference(running.project, "mlp", {"x": x})[0]
    np.testing.assert_allclose(np.array(y.contents.fp32_contents).reshape(2, 10), expected, rtol=1e-5)

    request, given = typed_request("flags", "x", "BOOL", [1, 2])
    given.contents.bool_contents.extend([True, False])
    response, call = stub.ModelInfer.with_call(request, metadata=(("x-request-id", "mine-1"),))
    assert list(response.outputs[0].contents.bool_contents) == [True, False]
    assert ("x-request-id", "mine-1") in call.trailing_metadata()  # echoed, as HTTP's X-Request-ID
    request, given = typed_request("words", "text", "BYTES", [2])
    given.contents.bytes_contents.extend([b"MiXeD", b"Two"])
    assert list(stub.ModelInfer(request).outputs[0].contents.bytes_contents) == [b"mixed", b"two"]
    # FP16 has no typed field: asked for it, the answer is raw whatever the request was
    request, given = typed_request("half", "x", "FP16", [1, 3])
    request.inputs.pop()
    request.raw_input_contents.append(np.array([1.5, 2.5, -3.0], dtype="<f2").tobytes())
    request.inputs.add(name="x", datatype="FP16", shape=[1, 3])
    response = stub.ModelInfer(request)
    assert np.frombuffer(response.raw_output_contents[0], dtype="<f2").tolist() == [1.5, 2.5, -3.0]


def test_async_infer_calls_back(client: triton.InferenceServerClient, running: Running) -> None:
    x = np.ones((1, 256), dtype=np.float32)
    done = threading.Event()
    results: list[Any] = []

    def callback(result: Any, error: Any) -> None:
        results.append((result, error))
        done.set()

    client.async_infer("mlp", [tensor("x", x, "FP32")], callback, request_id="async-1")
    assert done.wait(30)
    ((result, error),) = results
    assert error is None and result.get_response().id == "async-1"
    np.testing.assert_allclose(result.as_numpy("y"), reference(running.project, "mlp", {"x": x})[0], rtol=1e-5)


def rest_error(running: Running, model: str, body: dict[str, Any]) -> tuple[int, str]:
    response = httpx.post(f"{running.url}/v2/models/{model}/infer", json=body)
    return response.status_code, response.json()["error"]


def test_errors_are_statuses_with_the_words_of_rest(client: triton.InferenceServerClient, running: Running) -> None:
    ones = np.ones((1, 4))
    cases = [  # (model, what tritonclient sends, what the same mistake is over REST, the status code)
        ("iris", [tensor("input", ones, "FP64")], {"name": "input", "datatype": "FP64", "shape": [1, 4]}, "INVALID_ARGUMENT"),
        ("iris", [tensor("input", np.ones((1, 5), np.float32), "FP32")], {"name": "input", "datatype": "FP32", "shape": [1, 5]}, "INVALID_ARGUMENT"),
        ("iris", [tensor("features", ones.astype(np.float32), "FP32")], {"name": "features", "datatype": "FP32", "shape": [1, 4]}, "INVALID_ARGUMENT"),
        ("nope", [tensor("x", ones.astype(np.float32), "FP32")], {"name": "x", "datatype": "FP32", "shape": [1, 4]}, "NOT_FOUND"),
        ("echo", [tensor("x", ones.astype(np.float32), "FP32")], {"name": "x", "datatype": "FP32", "shape": [1, 4]}, "NOT_FOUND"),
    ]  # fmt: skip
    for model, inputs, rest_input, code in cases:
        status, message = rest_error(running, model, {"inputs": [{**rest_input, "data": [1.0] * 4}]})
        assert grpc_error(lambda m=model, i=inputs: client.infer(m, i)) == (f"StatusCode.{code}", message), model
        assert status == {"INVALID_ARGUMENT": 400, "NOT_FOUND": 404}[code]
    x = [tensor("x", np.ones((1, 4), np.float32), "FP32")]
    status, message = rest_error(
        running,
        "linear",
        {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1] * 4}], "outputs": [{"name": "z"}]},
    )
    assert grpc_error(lambda: client.infer("linear", x, outputs=[triton.InferRequestedOutput("z")])) == (
        "StatusCode.INVALID_ARGUMENT",
        message,
    )
    assert message == "Unknown output 'z'; the model's outputs are 'probabilities', 'logits'."
    twice = [triton.InferRequestedOutput("logits"), triton.InferRequestedOutput("logits")]
    assert grpc_error(lambda: client.infer("linear", x, outputs=twice)) == (
        "StatusCode.INVALID_ARGUMENT",
        "Output 'logits' is requested twice; name each output once.",
    )
    assert grpc_error(lambda: client.get_model_metadata("nope")) == (
        "StatusCode.NOT_FOUND",
        "No model 'nope'; the models served over the Open Inference Protocol are: 'iris', 'mlp', 'linear', 'half', "
        "'flags', 'words'.",
    )
    assert grpc_error(lambda: client.get_model_config("iris", "2")) == (
        "StatusCode.NOT_FOUND",
        "Model 'iris' has no version '2'; localserve serves version 1 only.",
    )
    assert grpc_error(lambda: client.is_model_ready("echo"))[0] == "StatusCode.NOT_FOUND"


def test_grpc_own_mistakes_are_invalid_arguments(stub: Any) -> None:
    def status_of(request: Any) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(request)
        return caught.value.code(), caught.value.details()

    request, given = typed_request("half", "x", "FP16", [1, 3])
    given.contents.fp32_contents.extend([1.0, 2.0, 3.0])
    with pytest.raises(grpc.RpcError) as caught:
        stub.ModelInfer(request, metadata=(("x-request-id", "mine-2"),))
    assert ("x-request-id", "mine-2") in caught.value.trailing_metadata()  # errors carry it too
    assert status_of(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'x' is FP16, which has no field in 'contents'; send its values in raw_input_contents.",
    )
    request, given = typed_request("mlp", "x", "FP32", [1, 256])
    given.contents.fp32_contents.extend([1.0] * 255)
    assert status_of(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'x' has shape [1, 256], which holds 256 elements, but contents.fp32_contents has 255.",
    )
    request, given = typed_request("mlp", "x", "FP32", [2**62, 2**62])  # a product past int64: only a number
    request.raw_input_contents.append(b"\0" * 8)
    assert status_of(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'x' has shape [4611686018427387904, 4611686018427387904]; the model expects [-1, 256] (-1: any size).",
    )
    request, given = typed_request("mlp", "x", "FP32", [1, 256])
    request.raw_input_contents.append(b"\0" * 1023)
    assert status_of(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'x' has 1023 bytes in raw_input_contents, but shape [1, 256] of FP32 takes 256 x 4 = 1024 bytes.",
    )
    request, given = typed_request("words", "text", "BYTES", [2])
    request.raw_input_contents.append(b"\x05\0\0\0hello\xff\xff\xff\x7fx")
    assert status_of(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Element 1 of input 'text' (BYTES) says 2147483647 bytes but only 1 are left in its raw contents.",
    )
    request, given = typed_request("flags", "x", "BOOL", [1, 2])
    request.raw_input_contents.append(b"\x01\x02")
    assert status_of(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'x' is BOOL but byte 1 of its raw contents is 2; BOOL elements are one byte, 0 or 1.",
    )
    request = service_pb2.ModelInferRequest(model_name="mlp")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 256]).contents.fp32_contents.extend([0.0] * 256)
    for _ in range(2000):  # thousands of inputs (within the 64 KiB limit): the second is refused
        request.inputs.add(name="x", datatype="FP32", shape=[1, 256])
    assert status_of(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "Input 'x' is given twice; each input must be given once.",
    )
    request = service_pb2.ModelInferRequest(model_name="mlp")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 256])
    request.raw_input_contents.extend([b"\0" * 1024, b"\0" * 1024])
    assert status_of(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "The request has 2 raw_input_contents for 1 inputs; give one entry per input, in the order of 'inputs'.",
    )


def test_a_message_that_does_not_parse_and_a_name_past_the_metadata_limit_get_their_own_status(
    running: Running,
) -> None:
    """grpc answers UNKNOWN for a request its deserializer cannot parse, and RESOURCE_EXHAUSTED for a status whose
    percent-encoded grpc-message passes its metadata limit: each now says what was wrong."""
    with grpc.insecure_channel(running.target) as channel:
        raw = channel.unary_unary(f"/inference.GRPCInferenceService/{'ModelReady'}")
        with pytest.raises(grpc.RpcError) as caught:
            raw(b"\xff\xff")
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details().startswith("The ModelReadyRequest message could not be parsed: ")
        ready = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelReady
        with pytest.raises(grpc.RpcError) as caught:
            ready(service_pb2.ModelReadyRequest(name="é" * 3000))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    message = caught.value.details()
    assert message.startswith("No model 'éééé") and message.endswith("more characters cut)"), message
    encoded = sum(1 if 0x20 <= byte <= 0x7E and byte != 0x25 else 3 for byte in message.encode())
    assert encoded <= 4096  # grpc-message percent-encoded: within half of gRPC's 8 KiB soft limit


def test_a_message_over_the_body_limit_is_refused_unread(
    client: triton.InferenceServerClient, running: Running
) -> None:
    big = np.zeros((MAX_BODY // 1024, 256), dtype=np.float32)  # 64 KiB of floats is 64 rows of 1 KiB
    code, message = grpc_error(lambda: client.infer("mlp", [tensor("x", big, "FP32")]))
    assert code == "StatusCode.RESOURCE_EXHAUSTED"
    assert "larger than max" in message and str(MAX_BODY) in message, message
    good = {"inputs": [{"name": "x", "shape": [1, 256], "datatype": "FP32", "data": [0.5] * 256}]}
    assert httpx.post(f"{running.url}/v2/models/mlp/infer", json=good).status_code == 200


def test_grpc_requests_are_counted_with_the_rest(client: triton.InferenceServerClient, running: Running) -> None:
    before = client.get_inference_statistics("mlp").model_stats[0]
    rest_before = httpx.get(f"{running.url}/v2/models/mlp/stats").json()["model_stats"][0]
    x = np.ones((2, 256), dtype=np.float32)
    client.infer("mlp", [tensor("x", x, "FP32")])
    grpc_error(lambda: client.infer("mlp", [tensor("x", x.astype(np.float64), "FP64")]))
    after = client.get_inference_statistics("mlp").model_stats[0]
    stats, was = after.inference_stats, before.inference_stats
    assert (stats.success.count, stats.fail.count) == (was.success.count + 1, was.fail.count + 1)
    assert (after.execution_count, after.inference_count) == (before.execution_count + 1, before.inference_count + 2)
    rest_after = httpx.get(f"{running.url}/v2/models/mlp/stats").json()["model_stats"][0]
    assert rest_after["inference_stats"]["success"]["count"] == rest_before["inference_stats"]["success"]["count"] + 1
    assert [s.name for s in client.get_inference_statistics().model_stats] == [
        "iris",
        "mlp",
        "linear",
        "half",
        "flags",
        "words",
    ]
    metrics = httpx.get(f"{running.url}/metrics").text
    assert sample(metrics, "localserve_requests_total", api="mlp", code="400") >= 1


def test_every_replica_serves_grpc_on_the_port_from_the_environment() -> None:
    import time

    port = free_port()
    with server("--project", str(EXAMPLES / "iris_onnx"), "--replicas", "2", LOCALSERVE_GRPC_PORT=str(port)) as (
        _,
        proc,
    ):
        line = f"serving inference.GRPCInferenceService (the Open Inference Protocol over gRPC) at 127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        # each replica names the address once it serves it, and says when its API is loaded (a replica
        # still loading answers UNAVAILABLE, as its HTTP routes answer 503)
        while output_of(proc).count(line) < 2 or output_of(proc).count("api 'iris' loaded in ") < 2:
            assert time.monotonic() < deadline, output_of(proc)
            time.sleep(0.05)
        x = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
        for _ in range(4):  # a new connection each time: the kernel spreads them over the replicas
            with triton.InferenceServerClient(f"127.0.0.1:{port}") as fresh:
                assert fresh.infer("iris", [tensor("input", x, "FP32")]).as_numpy("probabilities").shape == (1, 3)


def test_the_grpc_port_must_differ_from_the_http_port() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "localserve", "serve", "--port", "8123", "--grpc-port", "8123"],
        cwd=EXAMPLES / "iris_onnx",
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (
        1,
        "Error: --grpc-port 8123 is the HTTP port (--port); give gRPC a port of its own, e.g. 8081.",
    )


def test_sigterm_stops_grpc_with_http_and_exits_0() -> None:
    import signal
    import socket

    port = free_port()
    with server("--project", str(EXAMPLES / "iris_onnx"), "--grpc-port", str(port)) as (_, proc):
        with triton.InferenceServerClient(f"127.0.0.1:{port}") as grpc_client:
            assert grpc_client.is_server_ready()
            x = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
            grpc_client.infer("iris", [tensor("input", x, "FP32")], headers={"x-request-id": "sigterm-1"})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, output_of(proc)
    # the access log has the call, as it has HTTP requests
    assert "[iris sigterm-1] POST /inference.GRPCInferenceService/ModelInfer 200 " in output_of(proc)
    with socket.socket() as sock:  # the gRPC port was released
        sock.bind(("127.0.0.1", port))
