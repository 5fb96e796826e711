"""``localserve serve`` as a real process, tracing to a real OTLP/HTTP receiver, configured by OTEL_* alone."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.conftest import EXAMPLES, free_port, wait_until
from tests.models import onnx_linear
from tests.test_e2e import output_of, server
from tests.tracing.receiver import Receiver, Span, otlp_receiver

pytestmark = pytest.mark.slow

CONFIG = """\
- {kind: api, name: iris, model: iris.onnx, request_handler: handler.py}
- {kind: api, name: linear, model: linear.onnx}
- {kind: api, name: talk, handler: talk:handler}
- {kind: api, name: caller, handler: caller:handler}
"""
CALLER = """
import os
import urllib.request

from opentelemetry.propagate import inject


def handler(request, context):
    headers = {"Content-Type": "application/json"}
    inject(headers)  # the request's span is current on the API's thread
    call = urllib.request.Request(os.environ["LOCALSERVE_URL"] + "/talk", data=b"{}", headers=headers)
    with urllib.request.urlopen(call, timeout=30) as answer:
        return {"content": {"talk": answer.status}}
"""
TALK = """
import logging


def handler(request, context):
    logging.getLogger("talk").warning("said while serving")
    print("printed while serving")
    return {"content": {"ok": True}}
"""
SAMPLE = {"sepal_length": 5.2, "sepal_width": 3.6, "petal_length": 1.4, "petal_width": 0.3}
SERVER_KIND = 2  # SPAN_KIND_SERVER in OTLP


def project(root: Path) -> Path:
    root.mkdir()
    (root / "cortex.yaml").write_text(CONFIG)
    shutil.copy(EXAMPLES / "iris_onnx" / "iris.onnx", root / "iris.onnx")
    shutil.copy(EXAMPLES / "iris_onnx" / "handler.py", root / "handler.py")
    onnx_linear(root / "linear.onnx")
    (root / "talk.py").write_text(TALK)
    (root / "caller.py").write_text(CALLER)
    return root


def otel_env(endpoint: str) -> dict[str, str]:
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "iris-service",
        "OTEL_BSP_SCHEDULE_DELAY": "20",  # milliseconds: the spans leave soon after each request
    }


class Running:
    def __init__(self, url: str, grpc: str, receiver: Receiver, proc: object) -> None:
        self.url, self.grpc, self.receiver, self.proc = url, grpc, receiver, proc


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = project(tmp_path_factory.mktemp("traced") / "project")
    grpc_port = free_port()
    with (
        otlp_receiver() as receiver,
        server("--grpc-port", str(grpc_port), "--log-format", "json", cwd=root, **otel_env(receiver.endpoint)) as (
            url,
            proc,
        ),
    ):
        yield Running(url, f"127.0.0.1:{grpc_port}", receiver, proc)


def traceparent(n: int) -> tuple[str, str, str]:
    """A client's (traceparent header, trace id, span id), distinct for each ``n``."""
    trace_id, span_id = f"{n:032x}", f"{n + 0xABC:016x}"
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def server_span(receiver: Receiver, trace_id: str) -> Span:
    def found(spans: list[Span]) -> Span | None:
        return next((s for s in spans if s.trace_id == trace_id and s.kind == SERVER_KIND), None)

    span: Span = receiver.wait_for(found, f"SERVER span in trace {trace_id}")
    return span


def test_a_native_request_continues_the_clients_trace_with_its_stages_log_and_exemplar(running: Running) -> None:
    header, trace_id, parent = traceparent(0x11)
    response = httpx.post(f"{running.url}/iris", json=SAMPLE, headers={"traceparent": header})
    assert response.status_code == 200
    span = server_span(running.receiver, trace_id)
    assert (span.name, span.parent, span.resource["service.name"]) == ("POST /iris", parent, "iris-service")
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["http.request.method"] == "POST" and span.attributes["localserve.api"] == "iris"
    children = running.receiver.wait_for(
        lambda spans: len(running.receiver.children(span)) >= 4 and running.receiver.children(span), "child spans"
    )
    assert {"queue", "pre_inference", "model", "post_inference"} <= {c.name for c in children}

    # The access log's JSON line names the trace; /metrics in OpenMetrics has it as an exemplar.
    def access_line() -> dict[str, object] | None:
        for line in output_of(running.proc).splitlines():  # type: ignore[arg-type]
            if line.startswith("{") and '"POST /iris 200' in line:
                return json.loads(line)  # type: ignore[no-any-return]
        return None

    wait_until(access_line, "the access line")
    line = access_line()
    assert line is not None and (line["trace_id"], line["span_id"]) == (trace_id, span.span_id)
    metrics = httpx.get(f"{running.url}/metrics", headers={"accept": "application/openmetrics-text"}).text
    assert f'trace_id="{trace_id}"' in metrics
    assert "traces: OTLP http/protobuf to " + running.receiver.endpoint + "/v1/traces" in output_of(running.proc)  # type: ignore[arg-type]


def test_user_codes_log_lines_carry_the_trace(running: Running) -> None:
    header, trace_id, _ = traceparent(0x55)
    assert httpx.post(f"{running.url}/talk", json={}, headers={"traceparent": header}).status_code == 200
    span = server_span(running.receiver, trace_id)

    def lines() -> list[dict[str, object]]:
        found = []
        for line in output_of(running.proc).splitlines():  # type: ignore[arg-type]
            if line.startswith("{") and "while serving" in line:
                found.append(json.loads(line))
        return found

    wait_until(lambda: len(lines()) == 2, "the handler's two lines")
    assert [(line["message"], line["trace_id"], line["span_id"]) for line in lines()] == [
        ("said while serving", trace_id, span.span_id),
        ("printed while serving", trace_id, span.span_id),
    ]


def test_a_call_to_another_api_carries_the_trace_on(running: Running) -> None:
    header, trace_id, _ = traceparent(0x66)
    response = httpx.post(f"{running.url}/caller", json={}, headers={"traceparent": header}, timeout=30)
    assert response.json() == {"talk": 200}

    def both(spans: list[Span]) -> list[Span] | None:
        found = sorted((s for s in spans if s.trace_id == trace_id and s.kind == SERVER_KIND), key=lambda s: s.name)
        return found if len(found) == 2 else None

    caller, talk = running.receiver.wait_for(both, "both APIs' spans")
    assert (caller.name, talk.name) == ("POST /caller", "POST /talk")
    assert talk.parent == caller.span_id


def test_v2_rest_continues_the_clients_trace(running: Running) -> None:
    header, trace_id, parent = traceparent(0x22)
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    response = httpx.post(f"{running.url}/v2/models/linear/infer", json=body, headers={"traceparent": header})
    assert response.status_code == 200, response.text
    span = server_span(running.receiver, trace_id)
    assert (span.name, span.parent) == ("POST /v2/models/linear/infer", parent)
    assert (span.attributes["localserve.model"], span.attributes["localserve.model.location"]) == (
        "linear",
        "linear.onnx",
    )
    assert span.attributes["http.response.status_code"] == 200
    children = running.receiver.wait_for(lambda _: running.receiver.children(span), "child spans")
    assert {"decode", "model"} <= {c.name for c in children}


def test_grpc_model_infer_continues_the_trace_in_its_metadata(running: Running) -> None:
    import tritonclient.grpc as triton
    from tritonclient.utils import InferenceServerException

    header, trace_id, parent = traceparent(0x33)
    client = triton.InferenceServerClient(running.grpc)
    try:
        given = triton.InferInput("x", [1, 4], "FP32")
        given.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
        result = client.infer("linear", [given], headers={"traceparent": header})
        assert result.as_numpy("probabilities").shape == (1, 3)
    finally:
        client.close()
    span = server_span(running.receiver, trace_id)
    assert (span.name, span.parent) == ("inference.GRPCInferenceService/ModelInfer", parent)
    rpc = {k: v for k, v in span.attributes.items() if k.startswith("rpc.")}
    assert rpc == {
        "rpc.system": "grpc",
        "rpc.service": "inference.GRPCInferenceService",
        "rpc.method": "ModelInfer",
        "rpc.grpc.status_code": 0,  # OK
    }
    assert (span.attributes["localserve.model"], span.attributes["localserve.model.version"]) == ("linear", "")
    # A call refused: its span has the code the client got (INVALID_ARGUMENT), status ERROR and the exception.
    header, trace_id, _ = traceparent(0x34)
    client = triton.InferenceServerClient(running.grpc)
    try:
        wrong = triton.InferInput("nope", [1, 4], "FP32")
        wrong.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
        with pytest.raises(InferenceServerException) as caught:
            client.infer("linear", [wrong], headers={"traceparent": header})
        assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    finally:
        client.close()
    failed = server_span(running.receiver, trace_id)
    assert failed.attributes["rpc.grpc.status_code"] == 3 and failed.status == 2 and "exception" in failed.events


def test_a_400_is_recorded_on_its_span(running: Running) -> None:
    header, trace_id, _ = traceparent(0x44)
    response = httpx.post(
        f"{running.url}/iris", content=b"{not json", headers={"traceparent": header, "content-type": "application/json"}
    )
    assert response.status_code == 400
    span = server_span(running.receiver, trace_id)
    assert span.attributes["http.response.status_code"] == 400
    assert span.status == 2 and "exception" in span.events  # STATUS_CODE_ERROR, with the exception's event
    assert span.attributes["error.type"] == "RequestError"


def test_a_collector_that_is_down_fails_and_slows_nothing(tmp_path: Path) -> None:
    dead = free_port()  # nothing listens there
    project = tmp_path / "proj"
    project.mkdir()
    (project / "main.py").write_text("def handler(request, context):\n    return {'content': {'ok': True}}\n")
    # A queue of 64 spans: it fills (6 spans a request) and drops, which is told with the export's failure.
    env = {**otel_env(f"http://127.0.0.1:{dead}"), "OTEL_EXPORTER_OTLP_TIMEOUT": "1", "OTEL_BSP_MAX_QUEUE_SIZE": "64"}
    env["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "32"
    with server("--handler", "main:handler", cwd=project, **env) as (url, proc), httpx.Client() as client:
        statuses = [client.post(f"{url}/", json={}).status_code for _ in range(300)]
        assert statuses == [200] * 300
        assert client.get(f"{url}/healthz").status_code == 200
        wait_until(lambda: "tracing:" in output_of(proc), "the tracing warning")
    warnings = [line for line in output_of(proc).splitlines() if "tracing:" in line]
    assert len(warnings) == 1, warnings
    assert os.environ.get("OTEL_TRACES_EXPORTER") is None  # the test set it for the server only
