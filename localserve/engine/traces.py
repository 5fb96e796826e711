"""Ending a request's SERVER span: the status the client got, the API's attributes, its stages by their names."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from localserve.config import ApiConfig
from localserve.logs.trace_ids import trace_var

if TYPE_CHECKING:
    from localserve.tracing.spans import RequestSpan

# The first and the last stage of a request (``Job.times``' prepare and finish), by the API's kind.
STAGE_NAMES = {
    "request_handler": ("pre_inference", "post_inference"),
    "abeja": ("handler", "finish"),
    "predictor": ("predict", "finish"),
}
OWN_STAGES = ("decode", "encode")  # a protocol's own (V2): its tensors decoded, its outputs encoded


def enter_span(span: RequestSpan | None) -> None:
    """On an API's thread, as a request's stage begins: its log lines name its trace, and user code's own
    OpenTelemetry calls (a span of its own, ``propagate.inject`` into a call to another API) see its span."""
    if span is not None:
        trace_var.set(span.log_ids)
        span.enter()


def end_span(span: RequestSpan, api: ApiConfig, status: int) -> None:
    """End ``span`` now: ``status`` (HTTP's attribute, or the door's own: gRPC's code), the model, the stages."""
    answered = span.answered
    attributes: dict[str, object] = (
        {"http.response.status_code": status} if answered is None else dict(answered(status, span.error))
    )
    if api.model_location is not None:
        attributes["localserve.model.location"] = api.model_location
    names = OWN_STAGES if span.own_stages else STAGE_NAMES[api.kind]
    span.end(status, span.error, time.perf_counter(), names, attributes, span.sent)
