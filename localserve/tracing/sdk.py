"""The OpenTelemetry SDK set up the standard way: its resource, sampler, batch processor and exporters read their own
``OTEL_*`` variables; localserve picks only the exporter (``TraceExport``) and the default service name.

A collector that is down costs requests nothing: spans wait in the ``BatchSpanProcessor``'s queue (dropped when full)
and its thread exports them; failures are told once, then at most every ``WARN_EVERY`` seconds.
"""

from __future__ import annotations

import logging
import sys
import time

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from localserve.config.options import TraceExport

DEFAULT_SERVICE = "localserve"
WARN_EVERY = 60.0
# Where the SDK tells an export that failed or spans it dropped.
SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
)

log = logging.getLogger("localserve")


def make_provider(export: TraceExport) -> tuple[TracerProvider, BatchSpanProcessor]:
    """A tracer provider with the resource of ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` (service name
    ``localserve`` when neither names one), the sampler of ``OTEL_TRACES_SAMPLER``, and its batch processor."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
    provider = TracerProvider(resource=resource)
    processor = BatchSpanProcessor(_exporter(export))
    provider.add_span_processor(processor)
    for name in SDK_LOGGERS:  # one filter for all: an export failing and the queue filling are one story
        logger = logging.getLogger(name)
        if _SELDOM not in logger.filters:
            logger.addFilter(_SELDOM)
    return provider, processor


def _exporter(export: TraceExport) -> SpanExporter:
    if export.exporter == "console":  # stderr, with the logs: `localserve run` writes the answer on stdout
        return ConsoleSpanExporter(out=sys.stderr)
    if export.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


class SeldomFilter(logging.Filter):
    """Lets the first warning of the SDK through, then one every ``WARN_EVERY`` seconds with the count in between."""

    def __init__(self) -> None:
        super().__init__()
        self.next_at = 0.0
        self.quiet = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        now = time.monotonic()
        if now < self.next_at:
            self.quiet += 1
            return False
        if self.quiet:
            record.msg = f"{record.msg} ({self.quiet} more such message(s) of the tracing SDK were not logged)"
        record.msg = f"tracing: {record.msg} (requests are served as before; spans that cannot be sent are dropped)"
        self.next_at, self.quiet = now + WARN_EVERY, 0
        return True


_SELDOM = SeldomFilter()
