"""The OpenTelemetry SDK set up the standard way: the default service name, the exporter picked, and the SDK's
failures told once, then seldom."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.resources import SERVICE_NAME
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from localserve.config.options import TraceExport
from localserve.tracing import sdk


def test_the_service_is_localserve_unless_the_environment_names_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    provider, processor = sdk.make_provider(TraceExport(exporter="console"))
    try:
        assert provider.resource.attributes[SERVICE_NAME] == "localserve"
        assert isinstance(processor.span_exporter, ConsoleSpanExporter)
    finally:
        provider.shutdown()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "iris-service")
    provider, processor = sdk.make_provider(TraceExport(protocol="grpc"))
    try:
        assert provider.resource.attributes[SERVICE_NAME] == "iris-service"
        assert type(processor.span_exporter).__module__ == "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
    finally:
        provider.shutdown()


def test_the_sdks_warnings_are_told_once_then_every_minute_with_the_count_between(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]  # the filter's clock, set by the test: no time passes for real
    monkeypatch.setattr(sdk.time, "monotonic", lambda: clock[0])
    seldom = sdk.SeldomFilter()

    def record(level: int = logging.WARNING) -> logging.LogRecord:
        return logging.LogRecord("opentelemetry.sdk.trace.export", level, __file__, 1, "export failed", None, None)

    first = record()
    assert seldom.filter(first)
    assert first.getMessage() == (
        "tracing: export failed (requests are served as before; spans that cannot be sent are dropped)"
    )
    clock[0] += sdk.WARN_EVERY - 1
    assert not seldom.filter(record()) and not seldom.filter(record())
    assert seldom.filter(record(logging.DEBUG))  # below a warning: never held back
    clock[0] += 1
    later = record()
    assert seldom.filter(later)
    assert "export failed (2 more such message(s) of the tracing SDK were not logged)" in later.getMessage()
