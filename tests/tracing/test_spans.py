"""Spans of the in-process app (Starlette's TestClient) sent to a real OTLP/HTTP receiver: batches, jobs, shadows."""

from __future__ import annotations

import concurrent.futures
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from localserve.config.options import TraceExport
from localserve.server import ServeOptions
from tests.conftest import EXAMPLES, wait_until
from tests.models import onnx_linear
from tests.tracing.receiver import Receiver, Span, otlp_grpc_receiver, otlp_receiver

SERVER_KIND = 2
TRACED = ServeOptions(tracing=TraceExport(endpoint="(the test's receiver)"))


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A receiver, and the SDK's own variables pointing at it (the SDK reads them, as in a real process)."""
    with otlp_receiver() as found:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
        yield found


def traceparent(n: int) -> tuple[str, str]:
    return f"00-{n:032x}-{n + 1:016x}-01", f"{n:032x}"


def server_spans(spans: list[Span], trace_id: str) -> list[Span]:
    return [s for s in spans if s.trace_id == trace_id and s.kind == SERVER_KIND]


GATE = """
import threading

OPEN = threading.Event()
FIRST = []
"""
HANDLER = """
import gate


def pre_inference(sample, metadata):
    if not gate.FIRST:  # the first request holds the API's thread until the test has queued the others
        gate.FIRST.append(True)
        gate.OPEN.wait(60)
    return [sample]
"""


def test_a_batched_model_run_is_one_span_linking_every_request_it_served(
    make_project: Callable[..., Path], serve: Callable[..., Any], receiver: Receiver
) -> None:
    project = make_project(
        {
            "cortex.yaml": "- {kind: api, name: lin, model: lin.onnx, request_handler: handler.py, "
            "batching: {max_batch_size: 8, batch_interval: 30s}}\n",
            "gate.py": GATE,
            "handler.py": HANDLER,
        }
    )
    onnx_linear(project / "lin.onnx")
    parents = [traceparent(0x100 + n) for n in range(8)]
    with serve(project, TRACED) as client, concurrent.futures.ThreadPoolExecutor(8) as pool:
        pipeline = client.app.engine.apis["lin"].pipeline

        def post(header: str) -> int:
            return int(client.post("/lin", json=[1, 2, 3, 4], headers={"traceparent": header}).status_code)

        first = pool.submit(post, parents[0][0])
        wait_until(lambda: "gate" in sys.modules and sys.modules["gate"].FIRST, "the first request running")
        rest = [pool.submit(post, header) for header, _ in parents[1:]]
        wait_until(lambda: pipeline.queue.depth == 7, "seven requests queued behind it")
        sys.modules["gate"].OPEN.set()
        assert [f.result() for f in [first, *rest]] == [200] * 8

    traces = {trace_id for _, trace_id in parents}

    def batch(spans: list[Span]) -> Span | None:
        return next((s for s in spans if s.name == "batch" and len(s.links) > 1), None)

    found: Span = receiver.wait_for(batch, "batch span")
    assert {trace_id for trace_id, _ in found.links} == traces
    assert found.attributes["localserve.batch.size"] == 8
    # Each request's own span for the model run points back to the batch.
    servers = {s.trace_id: s for s in receiver.spans if s.kind == SERVER_KIND}
    assert set(servers) == traces and all(s.parent for s in servers.values())
    models = [s for s in receiver.spans if s.name == "model" and s.trace_id in traces]
    assert len(models) == 8 and all(s.links == [(found.trace_id, found.span_id)] for s in models)


def test_an_async_jobs_run_is_in_the_trace_of_its_submit(
    serve: Callable[..., Any], receiver: Receiver, tmp_path: Path
) -> None:
    project = tmp_path / "words"
    shutil.copytree(EXAMPLES / "async_words", project)
    header, trace_id = traceparent(0x200)
    with serve(project, TRACED) as client:
        job_id = client.post("/words", json={"text": "a b a"}, headers={"traceparent": header}).json()["id"]
        wait_until(lambda: client.get(f"/words/{job_id}").json()["status"] == "completed", "the job done")

    def run(spans: list[Span]) -> Span | None:
        return next((s for s in spans if s.name == "RUN /words" and s.trace_id == trace_id), None)

    job = receiver.wait_for(run, "the job's run")
    (submit,) = [s for s in server_spans(receiver.spans, trace_id) if s.name == "POST /words"]
    assert job.parent == submit.span_id and submit.parent == f"{0x201:016x}"
    assert job.attributes["localserve.job.id"] == job_id and job.attributes["http.response.status_code"] == 200
    polls = [s.name for s in receiver.spans if s.name.startswith("GET /words")]
    assert polls and set(polls) == {"GET /words/{id}"}  # named by the route, not by each job's id


def test_a_shadow_copy_is_a_child_of_the_request_it_copies(
    serve: Callable[..., Any], receiver: Receiver, tmp_path: Path
) -> None:
    project = tmp_path / "split"
    shutil.copytree(EXAMPLES / "iris_splitter", project)
    sample = (project / "sample.json").read_bytes()
    header, trace_id = traceparent(0x300)
    with serve(project, TRACED) as client:
        response = client.post(
            "/iris", content=sample, headers={"traceparent": header, "content-type": "application/json"}
        )
        assert response.status_code == 200

    def shadow(spans: list[Span]) -> Span | None:
        return next((s for s in spans if s.trace_id == trace_id and s.attributes.get("localserve.shadow")), None)

    copy = receiver.wait_for(shadow, "the shadow copy's span")
    (chosen,) = [s for s in server_spans(receiver.spans, trace_id) if not s.attributes.get("localserve.shadow")]
    assert chosen.name == "POST /iris" and chosen.attributes["localserve.api"] == response.headers["x-localserve-api"]
    assert copy.parent == chosen.span_id and copy.attributes["localserve.api"] == "iris-candidate"


def test_spans_go_over_otlp_grpc_when_the_protocol_says_so(
    make_project: Callable[..., Path], serve: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project({"main.py": "def handler(request, context):\n    return {'content': 'ok'}\n"})
    header, trace_id = traceparent(0x400)
    with otlp_grpc_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
        options = ServeOptions(tracing=TraceExport(protocol="grpc", endpoint=receiver.endpoint))
        with serve(project, options, handler="main:handler") as client:
            assert client.post("/", headers={"traceparent": header}).status_code == 200
        span = receiver.wait_for(lambda spans: server_spans(spans, trace_id), "the span over gRPC")[0]
    assert (span.name, span.parent, span.resource["service.name"]) == ("POST /", f"{0x401:016x}", "localserve")


def test_a_traced_request_leaves_no_reference_cycle_for_the_collector(
    make_project: Callable[..., Path], serve: Callable[..., Any], receiver: Receiver
) -> None:
    """A traced request's span is freed by its reference count, an error's too (its traceback holds
    ``Engine.submit``'s frame): left to the collector, each would stall a request now and then."""
    import gc

    from localserve.tracing.spans import RequestSpan

    project = make_project({"main.py": "def handler(request, context):\n    return {'content': 'ok'}\n"})
    options = ServeOptions(tracing=TraceExport(), max_body_size=64)
    with serve(project, options, handler="main:handler") as client:
        gc.collect()
        gc.disable()
        try:
            statuses = [client.post("/", content=b"x" * (8 if i % 2 else 100)).status_code for i in range(10)]
            alive = [o for o in gc.get_objects() if isinstance(o, RequestSpan)]
        finally:
            gc.enable()
    assert statuses == [413, 200] * 5
    assert alive == []


def test_a_malformed_traceparent_starts_a_trace_of_its_own(
    make_project: Callable[..., Path], serve: Callable[..., Any], receiver: Receiver
) -> None:
    project = make_project({"main.py": "def handler(request, context):\n    return {'content': 'ok'}\n"})
    with serve(project, TRACED, handler="main:handler") as client:
        response = client.post("/", headers={"traceparent": "00-not-a-trace-01", "x-request-id": "bad-parent"})
        assert response.status_code == 200

    def mine(spans: list[Span]) -> Span | None:
        return next((s for s in spans if s.attributes.get("localserve.request_id") == "bad-parent"), None)

    span = receiver.wait_for(mine, "the request's span")
    assert span.parent == "" and span.kind == SERVER_KIND and span.trace_id != "0" * 32
