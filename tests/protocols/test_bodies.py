"""Request bodies over ASGI, read whole up to the limit (one 413 wording for every door), and decompressed from
gzip or deflate to at most the limit: a bomb is a 413, junk after the stream or a cut stream a 400, another coding
a 415. Driven through real ASGI messages in-process; the hostile clients over a socket are tests/test_hostile*.py."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from localserve.errors import ClientGone, PayloadTooLarge, RequestError, UnsupportedMediaType
from localserve.protocols.bodies import decode_content, read_body


def receiver(*messages: dict[str, Any]) -> Callable[[], Awaitable[dict[str, Any]]]:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


def scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "headers": list(headers)}


def read(headers: tuple[tuple[bytes, bytes], ...], limit: int, *messages: dict[str, Any]) -> bytes:
    return asyncio.run(read_body(scope(*headers), receiver(*messages), limit))


def chunk(body: bytes, more: bool) -> dict[str, Any]:
    return {"type": "http.request", "body": body, "more_body": more}


def test_a_body_in_pieces_is_read_whole() -> None:
    assert read((), 10, chunk(b"ab", True), chunk(b"", True), chunk(b"cd", False)) == b"abcd"
    assert read(((b"content-length", b"4"),), 4, chunk(b"abcd", False)) == b"abcd"


def test_past_the_limit_is_a_413_before_reading_when_announced() -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        read(((b"content-length", b"11"),), 10)  # no message is received at all
    assert str(caught.value) == "The request body is too large: 11 bytes; the limit is 10 bytes (--max-body-size)."
    with pytest.raises(PayloadTooLarge) as caught:
        read((), 2 * 1024 * 1024, chunk(b"x" * (2 * 1024 * 1024), True), chunk(b"x", False))  # chunked: counted
    assert str(caught.value) == (
        "The request body is too large: at least 2097153 bytes; the limit is 2 MiB (2097152 bytes, --max-body-size)."
    )
    with pytest.raises(RequestError, match=r"^Invalid Content-Length header 'ten'\.$"):
        read(((b"content-length", b"ten"),), 10)


def test_a_client_that_leaves_while_sending_is_gone() -> None:
    with pytest.raises(ClientGone, match=r"^The client disconnected while sending its request\.$"):
        read((), 10, chunk(b"ab", True), {"type": "http.disconnect"})


def decode(body: bytes, coding: bytes, limit: int) -> bytes:
    return asyncio.run(decode_content(body, coding, limit))


def test_gzip_and_deflate_are_decompressed_and_identity_left_alone() -> None:
    data = b"tensor bytes " * 10_000  # past the first step: the rest is inflated off the loop
    assert decode(gzip.compress(data), b"gzip", len(data)) == data
    assert decode(zlib.compress(data), b" Deflate ", len(data)) == data
    assert decode(b"plain", b"identity", 5) == decode(b"plain", b"", 5) == b"plain"


def test_a_body_that_decompresses_past_the_limit_is_a_413() -> None:
    bomb = gzip.compress(b"\0" * 10_000_000)
    with pytest.raises(PayloadTooLarge) as caught:
        decode(bomb, b"gzip", 1000)
    assert str(caught.value) == (
        f"The request body decompresses to more than 1000 bytes (--max-body-size); {len(bomb)} bytes were sent with "
        "Content-Encoding gzip."
    )


def test_junk_a_cut_stream_and_another_coding_are_refused() -> None:
    two = gzip.compress(b"a") + gzip.compress(b"b")
    with pytest.raises(RequestError) as caught:
        decode(two, b"gzip", 100)
    assert str(caught.value) == (
        f"The gzip body has {len(gzip.compress(b'b'))} bytes after the end of its compressed stream (a second gzip "
        "member, or junk); send one stream (Content-Encoding: gzip)."
    )
    data = bytes(range(256)) * 2000
    cut = zlib.compress(data)[:-100]
    with pytest.raises(RequestError, match=r"^The deflate body ends before its compressed stream does"):
        decode(cut, b"deflate", len(data))
    with pytest.raises(RequestError, match=r"^The body is not valid gzip data \(Content-Encoding: gzip\): "):
        decode(b"not gzip", b"gzip", 100)
    with pytest.raises(UnsupportedMediaType) as caught:
        decode(b"x", b"br", 100)
    assert (
        str(caught.value)
        == "Content-Encoding 'br' is not supported here; send the body with gzip, deflate or no encoding."
    )
