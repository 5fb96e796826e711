"""What the connection refuses before the app sees a request: the words, and the refusal written whole."""

from __future__ import annotations

import json
from typing import Any

from localserve.server.connection.refusals import cut_body_message, header_refusal, write_refusal
from tests.server.connection.test_writes import Recorder


def test_a_coding_before_chunked_and_two_content_types_that_disagree_are_refused() -> None:
    status, message = header_refusal(b"Transfer-Encoding", b"gzip, chunked", None)  # type: ignore[misc]
    assert status == 501 and "Transfer-Encoding 'gzip, chunked' is not supported" in message
    assert header_refusal(b"transfer-encoding", b" Chunked ", None) is None
    status, message = header_refusal(b"Content-Type", b"text/plain", b"application/json")  # type: ignore[misc]
    assert status == 400 and "two Content-Type headers that disagree ('application/json' and 'text/plain')" in message
    assert header_refusal(b"content-type", b"Application/JSON", b"application/json ") is None  # the same type
    assert header_refusal(b"content-type", b"text/plain", None) is None  # the first one
    assert header_refusal(b"x-other", b"anything", b"text/plain") is None


def test_a_cut_body_is_told_by_what_was_announced() -> None:
    assert cut_body_message([(b"content-length", b"10")], 4) == (
        "The request body ended early: the connection was closed after 4 bytes of the 10 bytes its "
        "Content-Length announced."
    )
    assert cut_body_message([], 7).endswith("after 7 bytes of its chunked body, before the last (zero-size) chunk.")


def test_a_refusal_is_one_write_of_a_json_error_and_closes_the_connection() -> None:
    transport: Any = Recorder()
    write_refusal(transport, 431, "The request head is too large.", "rid-1")
    assert transport.closed and len(transport.writes) == 1
    head, body = transport.writes[0].split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert b"connection: close" in lines
    assert b"x-request-id: rid-1" in [line.lower() for line in lines]
    assert f"content-length: {len(body)}".encode() in [line.lower() for line in lines]
    assert json.loads(body)["error"] == "The request head is too large."
