"""gRPC goes through the same engine as REST and the native routes: one queue, one batch, one admission, one
deadline, one shutdown. The app runs in-process (Starlette's TestClient runs its lifespan, which starts the
gRPC server on the same event loop); a native request that blocks in pre_inference holds the API's thread
so that the tests can see, as states of the server, what waits in its queue."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from localserve.config.options import ServeOptions
from tests.conftest import free_port
from tests.models import ECHO_HANDLER, onnx_batch_echo
from tests.protocols.v2.test_routes import sample, v2_echo_body

INFER = "/inference.GRPCInferenceService/ModelInfer"
CONFIG = """
- kind: api
  name: echo
  model: echo.onnx
  request_handler: h.py
{extra}
"""


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    """Poll a state of the server (not a duration) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


@contextmanager
def grpc_app(serve: Any, make_project: Any, extra: str, **options: Any) -> Iterator[tuple[Any, Any, str]]:
    """The app (TestClient), the handler module (its started/release events) and the gRPC target."""
    project = make_project({"cortex.yaml": CONFIG.format(extra=extra), "h.py": ECHO_HANDLER})
    onnx_batch_echo(project / "echo.onnx")
    port = free_port()
    with serve(project, ServeOptions(grpc_port=port, **options)) as client:
        import h

        yield client, h, f"127.0.0.1:{port}"
        h.release.set()


def row_input(row: list[float]) -> triton.InferInput:
    given = triton.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(np.array([row], dtype=np.float32))
    return given


def grpc_status(call: Callable[[], Any]) -> tuple[str | None, str]:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value.status(), caught.value.message()


def test_grpc_rest_and_native_requests_run_in_one_batch(serve, make_project) -> None:
    extra = "  batching: {max_batch_size: 8, batch_interval: 10s}"
    with grpc_app(serve, make_project, extra) as (client, h, target), concurrent.futures.ThreadPoolExecutor(8) as pool:
        grpc_client = triton.InferenceServerClient(target)
        first = pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0] * 4]})
        assert h.started.wait(10)
        rows = [[float(i), 1.0, 2.0, 3.0] for i in range(1, 7)]
        futures = []
        for i, row in enumerate(rows):
            if i % 3 == 0:
                futures.append(pool.submit(client.post, "/echo", json={"x": [row]}))
            elif i % 3 == 1:
                body, headers = v2_echo_body(row)
                futures.append(pool.submit(client.post, "/v2/models/echo/infer", content=body, headers=headers))
            else:
                futures.append(pool.submit(grpc_client.infer, "echo", [row_input(row)]))
        pipeline = client.app.apis["echo"].pipeline
        wait_for(lambda: pipeline.queue.depth == len(rows), "the requests never queued")
        h.release.set()
        answers = [f.result(30) for f in futures]
        assert first.result(30).status_code == 200
        metrics = client.get("/metrics").text
        grpc_client.close()
    seen = set()
    for i, (row, answer) in enumerate(zip(rows, answers, strict=True)):
        if i % 3 == 0:
            y = np.asarray(answer.json()["y"])
        elif i % 3 == 1:
            length = int(answer.headers["inference-header-content-length"])
            y = triton_http_y(answer.content, length)
        else:
            y = answer.as_numpy("y")
        seen |= set((y - np.asarray([row])).ravel().tolist())
    assert seen == {8.0}  # 7 rows padded to 8, all in one model call
    assert sample(metrics, "localserve_batch_size_count", api="echo") == 1
    assert sample(metrics, "localserve_requests_total", api="echo", code="200") == 7  # gRPC counted too


def test_a_call_whose_message_is_still_read_does_not_hold_up_the_model(serve, make_project) -> None:
    """A gRPC call names its model only in its message: until read it is on its way to no API, and the model does not
    wait for it (a batcher that did waited its whole interval under load, while companions came anyway)."""
    import grpc

    from localserve.protocols.v2.grpc import inference_pb2 as pb

    request = pb.ModelInferRequest(model_name="echo")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    request.raw_input_contents.append(np.full((1, 4), 10.0, dtype=np.float32).tobytes())
    release = threading.Event()

    def held_message() -> Iterator[bytes]:  # the call starts at once; its message comes once released
        release.wait(30)
        yield request.SerializeToString()

    extra = "  batching: {max_batch_size: 8, batch_interval: 60s}"
    with (
        grpc_app(serve, make_project, extra) as (client, _, target),
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel,  # its own connection
    ):
        held = channel.stream_unary(INFER).future(held_message(), timeout=30)
        guard = client.app.grpc.guard
        wait_for(lambda: sum(c.calls for c in guard.connections.values()) == 1, "the held call never started")
        grpc_client = triton.InferenceServerClient(target)
        sent = pool.submit(grpc_client.infer, "echo", [row_input([1.0] * 4)])
        assert sent.result(30).as_numpy("y").tolist() == [[2.0] * 4]  # x + the batch size it ran at: alone
        assert not held.done()
        release.set()
        answer = pb.ModelInferResponse.FromString(held.result(30))
        assert np.frombuffer(answer.raw_output_contents[0], dtype=np.float32).tolist() == [11.0] * 4
        metrics = client.get("/metrics").text
        grpc_client.close()
    assert sample(metrics, "localserve_batch_size_count", api="echo") == 2


def triton_http_y(content: bytes, length: int) -> Any:
    import tritonclient.http as triton_http

    return triton_http.InferenceServerClient.parse_response_body(content, header_length=length).as_numpy("y")


def test_a_full_queue_is_resource_exhausted_and_a_passed_deadline_drops_the_work(serve, make_project) -> None:
    with (
        grpc_app(serve, make_project, "  max_queue: 2") as (client, h, target),
        concurrent.futures.ThreadPoolExecutor(4) as pool,
    ):
        grpc_client = triton.InferenceServerClient(target)
        blocked = pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0] * 4]})
        assert h.started.wait(10)
        pipeline = client.app.apis["echo"].pipeline
        # the client's deadline: the request waits in the queue, and leaves it unstarted when the deadline passes
        late = pool.submit(grpc_client.infer, "echo", [row_input([1.0] * 4)], client_timeout=2.0)
        wait_for(lambda: pipeline.queue.depth == 1, "the request never queued")
        with pytest.raises(InferenceServerException) as caught:
            late.result(10)
        assert caught.value.status() == "StatusCode.DEADLINE_EXCEEDED"
        wait_for(
            lambda: pipeline.queue.depth == 0, "the request past its deadline stayed queued"
        )  # the thread still blocks
        # a call the client cancels leaves the queue unstarted too
        cancelled: list[Any] = []
        call = grpc_client.async_infer("echo", [row_input([5.0] * 4)], lambda result, error: cancelled.append(error))
        wait_for(lambda: pipeline.queue.depth == 1, "the request never queued")
        call.cancel()
        wait_for(lambda: pipeline.queue.depth == 0, "the cancelled request stayed queued")
        queued = [pool.submit(grpc_client.infer, "echo", [row_input([float(i)] * 4)]) for i in range(2)]
        wait_for(lambda: pipeline.queue.depth == 2, "the requests never queued")
        assert grpc_status(lambda: grpc_client.infer("echo", [row_input([9.0] * 4)])) == (
            "StatusCode.RESOURCE_EXHAUSTED",
            "API 'echo' is at capacity: 2 requests are already queued (max_queue); retry later.",
        )
        h.release.set()
        assert blocked.result(30).status_code == 200
        assert [f.result(30).as_numpy("y").tolist() for f in queued] == [[[1.0] * 4], [[2.0] * 4]]
        metrics = client.get("/metrics").text
        grpc_client.close()
    # the model ran for the blocked request and the two queued ones: never for the one past its deadline, nor
    # for the cancelled one (which the engine records as 499, the client gone)
    assert sample(metrics, "localserve_stage_duration_seconds_count", api="echo", stage="inference") == 3
    assert sample(metrics, "localserve_requests_total", api="echo", code="499") >= 1
    assert sample(metrics, "localserve_requests_total", api="echo", code="503") == 1


def test_the_api_timeout_is_deadline_exceeded(serve, make_project) -> None:
    with (
        grpc_app(serve, make_project, "  timeout: 0.3") as (client, h, target),
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        grpc_client = triton.InferenceServerClient(target)
        pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0] * 4]})
        assert h.started.wait(10)
        assert grpc_status(lambda: grpc_client.infer("echo", [row_input([1.0] * 4)])) == (
            "StatusCode.DEADLINE_EXCEEDED",
            "api 'echo' did not answer within its timeout of 0.3 s (it had not started and was dropped).",
        )
        grpc_client.close()


def test_a_model_that_failed_to_load_is_unavailable(make_project, monkeypatch) -> None:
    from starlette.testclient import TestClient

    from localserve.config import load_config
    from localserve.server import create_app

    project = make_project({"cortex.yaml": "- {kind: api, name: broken, model: missing.onnx}\n"})
    monkeypatch.chdir(project)
    port = free_port()
    app = create_app(load_config(project), ServeOptions(keep_going=True, grpc_port=port))
    with TestClient(app, raise_server_exceptions=False):
        wait_for(lambda: app.apis["broken"].state != "loading", "the API never stopped loading")
        grpc_client = triton.InferenceServerClient(f"127.0.0.1:{port}")
        assert grpc_client.is_server_live() and not grpc_client.is_server_ready()
        assert not grpc_client.is_model_ready("broken")
        message = (
            "api 'broken' is not ready: it failed to load: Model 'missing.onnx' not found: missing.onnx does not "
            "exist (relative paths start at the project directory .)."
        )
        assert grpc_status(lambda: grpc_client.get_model_metadata("broken")) == ("StatusCode.UNAVAILABLE", message)
        given = triton.InferInput("x", [1], "FP32")
        given.set_data_from_numpy(np.ones(1, dtype=np.float32))
        assert grpc_status(lambda: grpc_client.infer("broken", [given])) == ("StatusCode.UNAVAILABLE", message)
        grpc_client.close()


def test_the_api_key_guards_every_rpc_but_the_health_probes(serve, make_project) -> None:
    with grpc_app(serve, make_project, "", api_key="s3cret") as (_, _h, target):
        grpc_client = triton.InferenceServerClient(target)
        assert grpc_client.is_server_live() and grpc_client.is_server_ready()
        assert grpc_status(lambda: grpc_client.get_model_metadata("echo")) == (
            "StatusCode.UNAUTHENTICATED",
            "Unauthorized: this server requires 'authorization: Bearer <key>' metadata (--api-key); no authorization "
            "metadata.",
        )
        assert (
            grpc_status(
                lambda: grpc_client.infer("echo", [row_input([1.0] * 4)], headers={"authorization": "Bearer no"})
            )[0]
            == "StatusCode.UNAUTHENTICATED"
        )
        result = grpc_client.infer("echo", [row_input([1.0] * 4)], headers={"authorization": "Bearer s3cret"})
        assert result.as_numpy("y").tolist() == [[2.0] * 4]
        assert grpc_client.get_model_metadata("echo", headers={"authorization": "bearer s3cret"}).name == "echo"
        grpc_client.close()


def test_a_flood_of_calls_is_refused_past_the_queue_and_http_keeps_answering(serve, make_project) -> None:
    import threading

    with (
        grpc_app(serve, make_project, "  max_queue: 20") as (client, h, target),
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        grpc_client = triton.InferenceServerClient(target)
        blocked = pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0] * 4]})
        assert h.started.wait(10)
        outcomes: list[str] = []
        lock = threading.Lock()

        def done(result: Any, error: Any) -> None:
            with lock:
                outcomes.append("ok" if error is None else str(error.status()))

        for i in range(50):  # one connection, 50 calls at once
            grpc_client.async_infer("echo", [row_input([float(i)] * 4)], done)
        pipeline = client.app.apis["echo"].pipeline
        wait_for(
            lambda: outcomes.count("StatusCode.RESOURCE_EXHAUSTED") == 30, "the calls past the queue were not refused"
        )
        assert pipeline.queue.depth == 20 and outcomes == ["StatusCode.RESOURCE_EXHAUSTED"] * 30
        assert client.get("/healthz").status_code == 200  # the event loop keeps answering HTTP
        assert client.get("/readyz").status_code == 200
        h.release.set()
        assert blocked.result(30).status_code == 200
        wait_for(lambda: len(outcomes) == 50, "the queued calls were not answered")
        assert outcomes.count("ok") == 20
        grpc_client.close()


def test_a_connection_holding_its_share_of_messages_is_refused_before_reading_more(
    serve, make_project, caplog, monkeypatch
) -> None:
    import math

    import grpc
    from tritonclient.grpc import service_pb2

    from localserve.protocols.v2.grpc import guard

    # One read at a time, so that exactly the calls read before the connection holds the limit are answered (with
    # several at once, those started before the limit is reached are read too: test_guard.py has that case).
    monkeypatch.setattr(guard, "READS_AT_ONCE", 1)

    limit = 100  # --max-body-size: the largest message, and what one connection's unanswered messages may hold
    message = service_pb2.ModelInferRequest(model_name="echo")
    message.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    message.raw_input_contents.append(np.ones(4, dtype=np.float32).tobytes())
    data = message.SerializeToString()
    held = math.ceil(limit / len(data))  # calls read before the connection holds the limit
    with (
        grpc_app(serve, make_project, "", max_body_size=limit) as (client, h, target),
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        grpc.insecure_channel(target) as channel,
    ):
        blocked = pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0] * 4]})
        assert h.started.wait(10)
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        calls = [infer.future(data) for _ in range(held + 3)]  # one connection: the messages wait behind the block
        wait_for(
            lambda: sum(call.done() for call in calls) == 3, "the calls past the connection's share were not refused"
        )
        refused = [call for call in calls if call.done()]
        assert {(call.code(), call.details()) for call in refused} == {
            (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"The connection holds {held * len(data)} bytes of messages not yet answered, the most one connection "
                f"may (--max-body-size {limit}); send again once some are answered, or over another connection.",
            )
        }
        metrics = client.get("/metrics").text
        assert sample(metrics, "localserve_grpc_refusals_total", reason="connection_buffer") == 3
        assert (
            sum("refused with RESOURCE_EXHAUSTED: The connection holds" in r.getMessage() for r in caplog.records) == 3
        )
        h.release.set()
        assert blocked.result(30).status_code == 200
        assert [call.exception() for call in calls if call not in refused] == [None] * held
