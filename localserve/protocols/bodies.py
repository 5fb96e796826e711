"""Request bodies over ASGI: read whole up to a limit (413), decompressed when sent with Content-Encoding.

Every HTTP front door reads its body here, so the 413 has one wording and one limit (``--max-body-size``).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
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


FIRST_STEP = 64 * 1024  # decompressed on the loop: cheaper than the thread hop it saves a small body
STEP = 1024 * 1024  # decompressed per step off the loop: between two steps the loop serves others


async def decode_content(body: bytes, coding: bytes, limit: int) -> bytes:
    """A body sent with ``Content-Encoding: coding`` (gzip or deflate), decompressed to at most ``limit`` bytes.

    Another coding is a 415, a body past ``limit`` a 413 (at most ``limit`` + 1 bytes are ever made), data after the
    compressed stream a 400. The first ``FIRST_STEP`` bytes are made on the event loop, the rest a ``STEP`` at a time on
    a worker thread, so a bomb never holds the loop (docs/reference/limits.md).
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
    most = min(FIRST_STEP, limit + 1)
    piece = _step(inflater, body, most, shown)
    pieces, size = [piece], len(piece)
    if not inflater.eof and size <= limit:
        log.debug("a %s request body is inflated off the event loop, %d bytes a step", shown, STEP)
        async with _inflating():  # at most INFLATING_AT_ONCE bodies grow at once: memory stays bounded
            size = await _inflate_rest(inflater, pieces, most, limit, shown)
    if size > limit:
        log.warning("rejected a %s request body: it decompresses past the limit of %s bytes", shown, limit)
        raise PayloadTooLarge(
            f"The request body decompresses to more than {limit} bytes (--max-body-size); {len(body)} bytes were "
            f"sent with Content-Encoding {shown}."
        )
    if inflater.unused_data:
        raise RequestError(
            f"The {shown} body has {len(inflater.unused_data)} bytes after the end of its compressed stream (a "
            f"second gzip member, or junk); send one stream (Content-Encoding: {shown})."
        )
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


INFLATING_AT_ONCE = 2  # bodies inflated past their first step at once: memory is at most this times --max-body-size
_semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _inflating() -> asyncio.Semaphore:
    """The running loop's semaphore of ``INFLATING_AT_ONCE``."""
    loop = asyncio.get_running_loop()
    semaphore = _semaphores.get(loop)
    if semaphore is None:
        semaphore = _semaphores[loop] = asyncio.Semaphore(INFLATING_AT_ONCE)
    return semaphore


async def _inflate_rest(inflater: Any, pieces: list[bytes], most: int, limit: int, shown: str) -> int:
    """Inflate the rest in steps of at most ``STEP`` bytes on a worker thread, appending to ``pieces``; the size."""
    size = sum(map(len, pieces))
    while not inflater.eof and size <= limit:
        pending = inflater.unconsumed_tail
        if not pending and len(pieces[-1]) < most:  # every byte taken, the output not cut by the step's bound
            raise RequestError(f"The {shown} body ends before its compressed stream does (Content-Encoding: {shown}).")
        most = min(STEP, limit + 1 - size)
        piece = await asyncio.to_thread(_step, inflater, pending, most, shown)
        pieces.append(piece)
        size += len(piece)
    return size


def _step(inflater: Any, data: bytes, most: int, shown: str) -> bytes:
    """At most ``most`` bytes more of ``inflater``'s output from ``data``; a 400 for data that is not ``shown``."""
    try:
        return bytes(inflater.decompress(data, most))
    except zlib.error as exc:
        raise RequestError(f"The body is not valid {shown} data (Content-Encoding: {shown}): {exc}.") from None
