"""THE renderer of an error as a gRPC status, as ``protocols.http.render_error`` is for HTTP.

The code comes from the error's class (its HTTP status, and ``Overloaded`` apart), the details
are the words REST sends in ``{"error": ...}`` (``error_text.error_message``: cut when very long,
hidden for 500s with ``--hide-errors``), and server errors are logged with user code's traceback.
The details travel in the ``grpc-message`` header, percent-encoded: ``details`` cuts them to what
gRPC's metadata limits let through (8 KiB soft, 16 KiB hard, for every header of the answer).
"""

from __future__ import annotations

import logging

import grpc

from localserve.errors import LocalServeError, Overloaded
from localserve.messages.error_text import error_message

log = logging.getLogger("localserve")

CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    404: grpc.StatusCode.NOT_FOUND,
    405: grpc.StatusCode.UNIMPLEMENTED,
    408: grpc.StatusCode.DEADLINE_EXCEEDED,  # the request message did not arrive in time (guard.py)
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    422: grpc.StatusCode.INVALID_ARGUMENT,
    499: grpc.StatusCode.CANCELLED,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
}


MAX_DETAILS = 4096  # bytes of grpc-message once percent-encoded: half of gRPC's soft limit on all the metadata


def details(text: str) -> str:
    """``text`` cut so that its percent-encoding (gRPC's: a byte outside printable ASCII, or ``%``, is three
    bytes) stays within ``MAX_DETAILS``; a longer text was refused whole (RESOURCE_EXHAUSTED) by the client."""
    size = 0
    for index, char in enumerate(text):
        size += sum(1 if 0x20 <= byte <= 0x7E and byte != 0x25 else 3 for byte in char.encode("utf-8", "replace"))
        if size > MAX_DETAILS - 40:  # room for the note of what was cut
            return f"{text[:index]}... ({len(text) - index:,} more characters cut)"
    return text


def code_of(exc: LocalServeError) -> grpc.StatusCode:
    """The gRPC status code of an error: from its HTTP status; a full queue is RESOURCE_EXHAUSTED, not UNAVAILABLE."""
    if isinstance(exc, Overloaded):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    status = exc.status_code
    return CODES.get(status, grpc.StatusCode.INTERNAL if status >= 500 else grpc.StatusCode.INVALID_ARGUMENT)


def render_status(
    exc: LocalServeError, request_id: str, *, api: str | None = None, hide_errors: bool = False
) -> tuple[grpc.StatusCode, str]:
    """The status code and details of ``exc``; a server error (a 500) is logged, with its traceback if any."""
    status = exc.status_code
    if status >= 500 and status not in (503, 504):
        if exc.details:
            log.error("request %s to api %r failed: %s\n%s", request_id, api, str(exc), exc.details)
        else:
            log.error("request %s to api %r failed: %s", request_id, api, str(exc))
    return code_of(exc), details(error_message(exc, hide_errors))


class GrpcWire:
    """What the gRPC door decides once for all its calls, as ``HttpWire`` for HTTP: whether a 500's details are
    hidden (``--hide-errors``). The servicer and the guard render through the one the door made."""

    __slots__ = ("hide_errors",)

    def __init__(self, *, hide_errors: bool) -> None:
        self.hide_errors = hide_errors

    def render(self, exc: LocalServeError, request_id: str, api: str | None = None) -> tuple[grpc.StatusCode, str]:
        """``exc`` as this wire's status (``render_status``)."""
        return render_status(exc, request_id, api=api, hide_errors=self.hide_errors)
