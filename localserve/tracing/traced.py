"""What a front door tells the engine's tracing about one request, and the trace context among its headers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

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
