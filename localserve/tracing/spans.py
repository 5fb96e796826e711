"""A request's spans: the SERVER span the engine opens and ends, its stages as child spans made after the fact.

The API's threads only stamp ``time.perf_counter()`` as each phase ends (``Job.times``, which the metrics read too); the
child spans are made from those stamps once the request is answered, as finished spans (the SDK's ``ReadableSpan``,
handed to the batch processor), far cheaper than spans started and ended through the tracer. A batched model run is a
span of its own, linking every request it served, and each ``model`` span links back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from localserve.config.options import TraceExport
from localserve.tracing.sdk import make_provider
from localserve.tracing.traced import Traced

# perf_counter() readings as epoch nanoseconds: one offset for the process, so stamps and spans agree.
_EPOCH_NS = time.time_ns()
_PERF_AT_EPOCH = time.perf_counter()

SHUTDOWN_WAIT = 5.0  # seconds the spans still queued get to leave at shutdown (a dead collector holds no stop)


def epoch_ns(perf: float) -> int:
    """A ``time.perf_counter()`` reading as nanoseconds since the epoch."""
    return _EPOCH_NS + int((perf - _PERF_AT_EPOCH) * 1e9)


class Tracing:
    """This process's tracer provider, and the spans of the requests it serves."""

    def __init__(self, export: TraceExport) -> None:
        self.export = export
        self.provider, self.processor = make_provider(export)
        version = _version()
        self.tracer = self.provider.get_tracer("localserve", version)
        self.scope = InstrumentationScope("localserve", version)
        self.ids = RandomIdGenerator()
        # User code's own spans (``trace.get_tracer``) go where ours go, unless the process set a provider already.
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(self.provider)

    def begin(self, traced: Traced, api: str, request_id: str, start: float) -> RequestSpan:
        """Open the SERVER span of one request (started at ``start``, a perf_counter reading), current until ``end``:
        a child of the client's context when it sent one, else of the current one (a shadow copy's, a job's)."""
        parent = propagate.extract(traced.carrier) if traced.carrier else None
        span = self.tracer.start_span(
            traced.name,
            context=parent,
            kind=SpanKind.SERVER,
            attributes={**traced.attributes, "localserve.api": api, "localserve.request_id": request_id},
            start_time=epoch_ns(start),
        )
        context = trace.set_span_in_context(span, parent)
        request = RequestSpan(self, span, context, otel_context.attach(context))
        request.answered = traced.answered
        return request

    def carrier(self) -> dict[str, str]:
        """The current context as W3C headers (an AsyncAPI job keeps its submit's, for its run)."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier

    def batch_run(self, tags: Sequence[Any], start: float, end: float) -> None:
        """A model run of several requests (``tags``: their jobs): one span linking each request's span."""
        spans: list[RequestSpan] = [span for tag in tags if (span := getattr(tag, "span", None)) is not None]
        links = [Link(s.context) for s in spans if s.context.is_valid]
        if not links:
            return
        batch = self.tracer.start_span(
            "batch",
            context=otel_context.Context(),  # a root: it serves several traces, each linked
            kind=SpanKind.INTERNAL,
            links=links,
            attributes={"localserve.batch.size": len(tags)},
            start_time=epoch_ns(start),
        )
        batch.end(end_time=epoch_ns(end))
        context = batch.get_span_context()
        for span in spans:
            span.batch = (context, len(tags))  # read on the event loop once the job is answered

    def shutdown(self) -> None:
        """Export what is queued and stop, waiting at most ``SHUTDOWN_WAIT`` seconds (a collector may be down)."""
        thread = threading.Thread(target=self.provider.shutdown, name="localserve-tracing-shutdown", daemon=True)
        thread.start()
        thread.join(SHUTDOWN_WAIT)


def _version() -> str:
    """localserve's version, as the instrumentation scope's (the package's root is above this layer)."""
    try:
        return metadata.version("localserve")
    except metadata.PackageNotFoundError:
        return ""


class RequestSpan:
    """The SERVER span of one request, what the API's threads stamp on it, and the batch its model run joined."""

    __slots__ = (
        "answered",
        "batch",
        "context",
        "current",
        "error",
        "log_ids",
        "own_stages",
        "sent",
        "span",
        "times",
        "token",
        "tracing",
    )

    def __init__(self, tracing: Tracing, span: trace.Span, current: otel_context.Context, token: object) -> None:
        self.tracing = tracing
        self.span = span
        self.current = current  # the OpenTelemetry context with this span current
        self.token = token
        self.context: SpanContext = span.get_span_context()
        self.times: list[float] = []  # the job's stamps (``Job.times``): queued, started, prepared, modelled, finished
        self.batch: tuple[SpanContext, int] | None = None
        self.own_stages = False  # the door's own first and last stages (V2: decode, encode)
        self.error: BaseException | None = None  # the error whose rendering the client got
        self.sent: float | None = None  # perf_counter() once the answer was sent
        self.answered: Callable[[int, BaseException | None], Mapping[str, Any]] | None = None  # Traced.answered
        context = self.context
        # (trace_id, span_id) for log lines and exemplars; None when there is no trace to join.
        self.log_ids = (format(context.trace_id, "032x"), format(context.span_id, "016x")) if context.is_valid else None

    def enter(self) -> None:
        """Make the span current on this thread (an API's, where user code runs), until the next request's."""
        otel_context.attach(self.current)

    @property
    def sampled(self) -> bool:
        """Whether the span is recorded and exported (the sampler's decision)."""
        return self.span.is_recording()

    def end(
        self,
        status: int,
        error: BaseException | None,
        end: float,
        names: tuple[str, str],
        attributes: Mapping[str, Any],
        sent: float | None = None,
    ) -> None:
        """End the span at ``end`` with the answer's ``status`` (and ``error``, the one the client got), its
        stages as children named ``names`` (the first stage and the last), and stop it being current."""
        span = self.span
        try:
            if span.is_recording():
                span.set_attributes(attributes)
                if error is not None:
                    span.record_exception(error, attributes={"http.response.status_code": status})
                    span.set_attribute("error.type", type(error).__name__)
                    span.set_status(Status(StatusCode.ERROR, str(error).split("\n", 1)[0][:300]))
                elif status >= 500 or status == 499:
                    span.set_status(Status(StatusCode.ERROR, f"status {status}"))
                self._children(names, sent)
            span.end(end_time=epoch_ns(end))
        finally:
            self.error = None  # its traceback holds Engine.submit's frame, which holds this
            otel_context.detach(self.token)  # type: ignore[arg-type]

    def _children(self, names: tuple[str, str], sent: float | None) -> None:
        """The stages of ``times`` as child spans: queue, the first stage, the model, the last stage, sending."""
        times = self.times
        if not times:
            return
        stages = ("queue", names[0], "model", names[1])
        for index in range(min(len(times) - 1, 4)):
            if index == 2 and self.batch is not None:
                batch, size = self.batch
                self._child(
                    stages[index], times[index], times[index + 1], [Link(batch)], {"localserve.batch.size": size}
                )
            else:
                self._child(stages[index], times[index], times[index + 1])
        if sent is not None and len(times) > 1:
            self._child("send", times[-1], sent)

    def _child(
        self, name: str, start: float, end: float, links: Sequence[Link] = (), attributes: dict[str, Any] | None = None
    ) -> None:
        """A finished child span, straight to the batch processor (sampled as its parent is)."""
        tracing, parent = self.tracing, self.context
        context = SpanContext(
            parent.trace_id, tracing.ids.generate_span_id(), False, parent.trace_flags, parent.trace_state
        )
        span = ReadableSpan(
            name,
            context,
            parent,
            tracing.provider.resource,
            attributes,
            links=links,
            instrumentation_scope=tracing.scope,
            start_time=epoch_ns(start),
            end_time=epoch_ns(end),
        )
        tracing.processor.on_end(span)
