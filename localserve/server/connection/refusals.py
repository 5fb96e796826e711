"""What the connection refuses before the app sees a request, in words, and the refusal written whole.

Every refusal is a JSON error from the one renderer (``protocols.http.render_error``), written in
one write with ``connection: close``.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from localserve.errors import RequestError
from localserve.messages.response import answer_headers
from localserve.protocols.http import render_error


def header_refusal(name: bytes, value: bytes, content_type: bytes | None) -> tuple[int, str] | None:
    """The (status, message) refusing header ``name: value``, or None. ``content_type``: the request's so far."""
    lowered = name.lower()
    if lowered == b"transfer-encoding" and value.strip().lower() != b"chunked":
        # llhttp takes any codings before a final "chunked" and would pass the body on undecoded.
        coding = value.decode("latin-1")
        return (
            501,
            f"Transfer-Encoding {coding!r} is not supported; send the body with Content-Length or with "
            "Transfer-Encoding: chunked alone.",
        )
    if (
        lowered == b"content-type"
        and content_type is not None
        and content_type.strip().lower() != value.strip().lower()
    ):
        # One body has one type: which of two differing headers a handler would see is a guess
        # (Starlette reads the first, a dict of headers the last), so neither is taken.
        first, second = content_type.decode("latin-1"), value.decode("latin-1")
        return 400, f"The request has two Content-Type headers that disagree ({first!r} and {second!r}); send one."
    return None


def cut_body_message(headers: list[tuple[bytes, bytes]], received: int) -> str:
    """The 400's words for a body the client cut short after ``received`` bytes."""
    length = next((value for name, value in headers if name == b"content-length"), None)
    if length is not None:
        announced = f"of the {length.decode('latin-1')} bytes its Content-Length announced"
    else:
        announced = "of its chunked body, before the last (zero-size) chunk"
    return f"The request body ended early: the connection was closed after {received} bytes {announced}."


def write_refusal(transport: asyncio.Transport, status: int, message: str, request_id: str) -> None:
    """Answer ``status`` with ``message`` as a JSON error, and close the connection."""
    reply = render_error(RequestError(message, status_code=status), request_id, logged=True)  # logged by the caller
    head = [STATUS_LINE[status]]
    for name, value in (*answer_headers(reply, request_id), (b"connection", b"close")):
        head += (name, b": ", value, b"\r\n")
    transport.write(b"".join((*head, b"\r\n", reply.body)))
    transport.close()
