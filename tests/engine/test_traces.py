"""Ending a request's SERVER span: the status the client got, the model's location, the stages named by the
API's kind. The in-process app's spans go to a real OTLP/HTTP receiver."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.models import onnx_linear
from tests.tracing.receiver import Receiver, Span
from tests.tracing.test_spans import SERVER_KIND, TRACED, receiver, traceparent

__all__ = ["receiver"]  # the fixture, shared with tests/tracing/test_spans.py

HANDLER = "def pre_inference(sample, metadata):\n    return [sample]\n"


def test_the_server_span_has_the_status_the_model_location_and_the_request_handlers_stages(
    make_project: Callable[..., Path], serve: Callable[..., Any], receiver: Receiver
) -> None:
    project = make_project(
        {
            "cortex.yaml": "- {kind: api, name: lin, model: lin.onnx, request_handler: handler.py}\n",
            "handler.py": HANDLER,
        }
    )
    onnx_linear(project / "lin.onnx")
    ok, ok_trace = traceparent(0x500)
    bad, bad_trace = traceparent(0x600)
    with serve(project, TRACED) as client:
        assert client.post("/lin", json=[1, 2, 3, 4], headers={"traceparent": ok}).status_code == 200
        assert client.post("/lin", json=[[[1]]], headers={"traceparent": bad}).status_code >= 400

    def server_of(trace_id: str) -> Callable[[list[Span]], Span | None]:
        return lambda spans: next((s for s in spans if s.trace_id == trace_id and s.kind == SERVER_KIND), None)

    span: Span = receiver.wait_for(server_of(ok_trace), "the 200's span")
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["localserve.model.location"] == "lin.onnx"
    children = receiver.wait_for(lambda _: receiver.children(span), "its stages")
    assert {"pre_inference", "model"} <= {c.name for c in children}
    failed: Span = receiver.wait_for(server_of(bad_trace), "the refused request's span")
    assert failed.attributes["http.response.status_code"] >= 400
