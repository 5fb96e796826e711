"""Request bodies over ASGI: read whole up to a limit (413), decompressed when sent with Content-Encoding.

Every HTTP front door reads its body here, so the 413 has one wording and one limit (``--max-body-size``).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from localserve.errors import ClientGone, PayloadTooLarge, RequestError, UnsupportedMediaType

log = logging.getLogger("localserve")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
MiB = 1024 * 1024


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body, or PayloadTooLarge (413) past ``limit`` bytes (before reading it when announced)."""
    _check_length(scope, limit)
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body"):
        if message["type"] == "http.disconnect":
            raise ClientGone("while sending its request")
        if len(body) > limit:  # no Content-Length (chunked): counted as it comes
            raise too_large(len(body), limit, at_least=True)
        return body
    chunks = [body]
    size = len(body)
    while message.get("more_body"):
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone("while sending its request")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(size, limit, at_least=True)
        chunks.append(chunk)
    return b"".join(chunks)


def _check_length(scope: Scope, limit: int) -> None:
    """A 400 for a Content-Length that is no number, a 413 for one over ``limit``."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise RequestError(f"Invalid Content-Length header {value.decode('latin-1')!r}.") from None
            if length > limit:
                raise too_large(length, limit)


def too_large(size: int, limit: int, *, at_least: bool = False) -> PayloadTooLarge:
    """The 413 for a body of ``size`` bytes over ``limit`` (``at_least``: the size is a lower bound)."""
    shown = (
        f"{limit / MiB:g} MiB ({limit} bytes, --max-body-size)" if limit >= MiB else f"{limit} bytes (--max-body-size)"
    )
    got = f"at least {size}" if at_least else str(size)
    log.warning("rejected a request body of %s bytes: over the limit of %s", got, shown)
    return PayloadTooLarge(f"The request body is too large: {got} bytes; the limit is {shown}.")


# Content-Encoding -> zlib's wbits: gzip, or zlib's format for deflate (what tritonclient sends).
_CODINGS = {b"gzip": 16 + zlib.MAX_WBITS, b"x-gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}


def decode_content(body: bytes, coding: bytes, limit: int) -> bytes:
    """A body sent with ``Content-Encoding: coding`` (gzip or deflate), decompressed to at most ``limit`` bytes.

    Triton's HTTP endpoint takes both (``tritonclient``'s ``request_compression_algorithm``); any
    other coding is a 415, a body that decompresses past ``limit`` a 413 (a small bomb cannot
    expand in memory: at most ``limit`` + 1 bytes are made).
    """
    name = coding.strip().lower()
    if name in (b"", b"identity"):
        return body
    wbits = _CODINGS.get(name)
    shown = name.decode("latin-1")
    if wbits is None:
        raise UnsupportedMediaType(
            f"Content-Encoding {shown!r} is not supported here; send the body with gzip, deflate or no encoding."
        )
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise RequestError(f"The body is not valid {shown} data (Content-Encoding: {shown}): {exc}.") from None
    if len(out) > limit:
        log.warning("rejected a %s request body: it decompresses past the limit of %s bytes", shown, limit)
        raise PayloadTooLarge(
            f"The request body decompresses to more than {limit} bytes (--max-body-size); {len(body)} bytes were "
            f"sent with Content-Encoding {shown}."
        )
    if not inflater.eof:
        raise RequestError(f"The {shown} body ends before its compressed stream does (Content-Encoding: {shown}).")
    return out
