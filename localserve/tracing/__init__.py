"""OpenTelemetry tracing: one SERVER span per request, its stages as child spans, batches linking their requests.

Example::

    tracing = start_tracing(TraceExport(exporter="otlp"))    # the SDK, configured from OTEL_* as it reads them
    span = tracing.begin(Traced(carrier, "POST /iris", {"http.request.method": "POST"}), "iris", start)
    ...
    span.end(200, None, end)

The engine opens and ends the span (``Engine.submit``); a front door only says what it received (``Traced``). No
OpenTelemetry module is imported until ``start_tracing``, so a server that does not trace never loads the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from localserve.config.options import TraceExport
from localserve.errors import ConfigError
from localserve.tracing.traced import HEADERS, Traced, carrier_of

if TYPE_CHECKING:
    from localserve.tracing.spans import Tracing

__all__ = ["HEADERS", "Traced", "carrier_of", "start_tracing"]


def start_tracing(export: TraceExport) -> Tracing:
    """The SDK's tracer provider for this process, exporting as ``export`` says (the ``tracing`` extra)."""
    try:
        from localserve.tracing.spans import Tracing  # lazy: opentelemetry (the SDK), only when tracing is on
    except ImportError as exc:
        missing = exc.name or "the OpenTelemetry SDK"
        raise ConfigError(
            f"Tracing is on (an OTEL_* variable asks for the {export.exporter!r} exporter) but {missing} is not "
            "installed; install it with pip install 'localserve[tracing]', or unset OTEL_TRACES_EXPORTER and "
            "OTEL_EXPORTER_OTLP_ENDPOINT."
        ) from None
    try:
        return Tracing(export)
    except ValueError as exc:  # what the SDK raises for settings it refuses (OTEL_BSP_* that disagree, say)
        raise ConfigError(f"The OpenTelemetry SDK refused its OTEL_* settings: {exc}") from None
