"""THE renderer of an error as a gRPC status, as ``protocols.http.render_error`` is for HTTP.

The code comes from the error's class (its HTTP status, and ``Overloaded`` apart), the details
are the words REST sends in ``{"error": ...}`` (``error_text.error_message``: cut when very long,
hidden for 500s with ``--hide-errors``), and server errors are logged with user code's traceback.
"""

from __future__ import annotations

import logging

import grpc

from localserve.error_text import error_message
from localserve.errors import LocalServeError, Overloaded

log = logging.getLogger("localserve")

CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    404: grpc.StatusCode.NOT_FOUND,
    405: grpc.StatusCode.UNIMPLEMENTED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    422: grpc.StatusCode.INVALID_ARGUMENT,
    499: grpc.StatusCode.CANCELLED,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
}


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
    return code_of(exc), error_message(exc, hide_errors)
