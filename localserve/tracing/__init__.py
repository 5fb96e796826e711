"""OpenTelemetry tracing: one SERVER span per request, its stages as child spans, batches linking their requests.

Example::

    tracing = start_tracing(TraceExport(exporter="otlp"))    # the SDK, configured from OTEL_* as it reads them
    span = tracing.begin(Traced(carrier, "POST /iris", {"http.request.method": "POST"}), "iris", start)
    ...
    span.end(200, None, end)

The engine opens and ends the span (``Engine.submit``); a front door only says what it received
(``Traced``: the client's ``traceparent``/``tracestate``/``baggage``, the route, its wire's attributes).
This module imports no OpenTelemetry module: ``start_tracing`` does, once tracing is on, so a server
that does not trace never loads the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from localserve.config.options import TraceExport
from localserve.errors import ConfigError

if TYPE_CHECKING:
    from localserve.tracing.spans import Tracing

__all__ = ["HEADERS", "Traced", "carrier_of", "start_tracing"]

HEADERS = (b"traceparent", b"tracestate", b"baggage")  # W3C Trace Context and Baggage: what a door passes on


class Traced(NamedTuple):
    """What a front door tells the engine's tracing about one request."""

    carrier: Mapping[str, str]  # the client's traceparent, tracestate, baggage (empty: continue the current context)
    name: str  # the span's name: the route (``POST /iris``), never a path with ids in it
    attributes: Mapping[str, Any]  # the wire's semantic-convention attributes (http.*, rpc.*)
    # The answer's status as the wire's attributes, given its HTTP status and error; None: http.response.status_code.
    answered: Callable[[int, BaseException | None], Mapping[str, Any]] | None = None


def carrier_of(headers: object) -> dict[str, str]:
    """The trace context among ``headers`` (``(name, value)`` pairs, lower-case names, bytes or str)."""
    found: dict[str, str] = {}
    for name, value in headers:  # type: ignore[attr-defined]
        key = name.encode("latin-1") if isinstance(name, str) else name
        if key in HEADERS:
            found[key.decode("latin-1")] = value if isinstance(value, str) else value.decode("latin-1")
    return found


def start_tracing(export: TraceExport) -> Tracing:
    """The SDK's tracer provider for this process, exporting as ``export`` says (the ``tracing`` extra)."""
    try:
        from localserve.tracing.spans import Tracing
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
