"""Whether ``serve`` traces its requests, read from OpenTelemetry's own variables (here, never below the CLI).

Tracing is on when ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``) or an OTLP endpoint
variable is set, and off otherwise; ``OTEL_SDK_DISABLED=true`` and ``OTEL_TRACES_EXPORTER=none`` turn it off.
The SDK reads every other ``OTEL_*`` variable itself, as its documentation says.
"""

from __future__ import annotations

from collections.abc import Mapping

from localserve.config.options import TraceExport
from localserve.errors import ConfigError

EXPORTERS = ("otlp", "console")
PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_ENDPOINTS = {"http/protobuf": "http://localhost:4318", "grpc": "http://localhost:4317"}


def trace_export(environ: Mapping[str, str]) -> TraceExport | None:
    """Where spans go by ``environ``'s ``OTEL_*`` variables; None: tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = [name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()]
    traces_endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if "none" in named:
        return None
    unknown = [name for name in named if name not in EXPORTERS]
    if unknown:
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={environ['OTEL_TRACES_EXPORTER']}: localserve sends spans with "
            f"{' or '.join(repr(e) for e in EXPORTERS)} (an OTLP collector such as Jaeger's or Tempo's takes them), "
            f"not {', '.join(repr(u) for u in unknown)}."
        )
    if not named and not (traces_endpoint or endpoint):
        return None
    exporter = named[0] if named else "otlp"
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or PROTOCOLS[0]
    ).strip()
    if exporter != "otlp":
        return TraceExport(exporter=exporter, protocol=protocol)
    if protocol not in PROTOCOLS:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: the OTLP exporter of OpenTelemetry's Python SDK speaks "
            f"{' or '.join(repr(p) for p in PROTOCOLS)}."
        )
    if traces_endpoint:
        where = traces_endpoint
    else:
        base = (endpoint or DEFAULT_ENDPOINTS[protocol]).rstrip("/")
        where = f"{base}/v1/traces" if protocol == "http/protobuf" else base
    return TraceExport(exporter="otlp", protocol=protocol, endpoint=where)
