"""Whatever user code returned -> a Reply (status, headers, body or stream) the server can send."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import numpy as np

from localserve.errors import HandlerError
from localserve.messages.encoding import dump_csv, dump_json, dump_msgpack, wants_msgpack

JSON_TYPE = b"application/json"
MSGPACK_TYPE = "application/msgpack"
NDJSON_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-jsonlines")
SERVER_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "content-type", "x-request-id"})
_SET_BY_US = {  # why each of SERVER_HEADERS (but Content-Type) is not the handler's to set
    "content-length": "it is the length of 'content'",
    "transfer-encoding": "a generator 'content' is sent chunked",
    "connection": "the server keeps or closes the connection",
    "x-request-id": "it is the request's id, the client's X-Request-ID when it sent one",
}
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
log = logging.getLogger("localserve")


@dataclass
class Reply:
    """A response ready to send; ``stream`` (an iterator of bytes) replaces ``body`` for generators."""

    status: int = 200
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    stream: Iterator[bytes] | None = None
    asgi: Any = None  # a Starlette Response returned by user code, sent as is
    value: Any = None  # the Python value, for the tracker
    sent: bytes | None = None  # written by the API's thread: what the event loop must still write
    after: Callable[[], None] | None = None  # user code to run once the answer is sent (post_predict)


NO_BODY = frozenset({204, 304})  # statuses whose responses carry no body, nor a Content-Length (RFC 9110)


def answer_headers(reply: Reply, request_id: str | None) -> list[tuple[bytes, bytes]]:
    """``reply``'s headers as sent: its own, then content-length and (given an id) x-request-id."""
    headers = list(reply.headers)
    if reply.status not in NO_BODY:
        headers.append((b"content-length", str(len(reply.body)).encode()))
    if request_id is not None:
        headers.append((b"x-request-id", request_id.encode("latin-1")))
    return headers


# -- ABEJA ---------------------------------------------------------------------------------


def abeja_reply(result: Any) -> Reply:
    """Render an ABEJA handler's returned dict ``{status_code, content_type, content, metadata}``."""
    if not isinstance(result, Mapping):
        raise HandlerError(
            f"The handler returned {_type_name(result)}; expected a dict with 'status_code', 'content_type', "
            "'content' and 'metadata'."
        )
    if not result.keys() <= ABEJA_KEYS:
        _warn_unknown_keys(result)
    status = _status(result.get("status_code", HTTPStatus.OK))
    content_type = result.get("content_type") or "text/plain"
    if not isinstance(content_type, str):
        raise HandlerError(f"The handler's 'content_type' is {_type_name(content_type)}; expected a string.")
    if _BAD_VALUE.search(content_type):
        raise HandlerError(f"The handler's 'content_type' {content_type!r} contains control characters.")
    headers = [(b"content-type", _latin1(content_type, "'content_type'"))]
    headers.extend(_metadata_headers(result.get("metadata")))
    content = result.get("content")
    reply = Reply(status=status, headers=headers, value=content)
    reply.body, reply.stream = _abeja_content(content, content_type.lower())
    if status in NO_BODY and (reply.body or reply.stream is not None):
        what = "a generator" if reply.stream is not None else f"{len(reply.body)} bytes"
        log.warning(
            "The handler answered %d with content (%s); a %d has no body, so it was dropped.", status, what, status
        )
        reply.body, reply.stream = b"", None
    return reply


def _abeja_content(content: Any, lowered: str) -> tuple[bytes, Iterator[bytes] | None]:
    """The body, or the stream, of an ABEJA handler's 'content', by its type and the (lower-case) content type."""
    if content is None:
        return b"", None
    if isinstance(content, bytes | bytearray | memoryview):
        return bytes(content), None  # Decision 1: bytes are sent as bytes
    if isinstance(content, str):
        return _utf8(content, "The handler's 'content'"), None
    if hasattr(content, "read"):
        return _read(content), None
    if isinstance(content, list):
        return _list_content(content, lowered), None
    if _is_stream(content):
        return b"", _chunks(content)  # Decision 3: generators are streamed
    return dump_json(content), None


def _read(content: Any) -> bytes:
    """What a file-like 'content' holds: its ``read()``, bytes or text; its failure is the handler's (a 500)."""
    try:
        data = content.read()
    except Exception as exc:
        raise HandlerError(
            f"Reading the handler's 'content' ({_type_name(content)}) failed: {type(exc).__name__}: {exc}"
        ) from None
    if isinstance(data, str):
        return _utf8(data, "The handler's 'content'.read()")
    if not isinstance(data, bytes | bytearray | memoryview):  # bytes(5) would be five NUL bytes
        raise HandlerError(f"The handler's 'content'.read() returned {_type_name(data)}; expected bytes or a str.")
    return bytes(data)


def _utf8(text: str, what: str) -> bytes:
    """``text`` as UTF-8, or a HandlerError naming ``what`` (a lone surrogate cannot be written)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise HandlerError(
            f"{what} is a str that UTF-8 cannot carry: {text[exc.start]!r} at {exc.start} is a lone surrogate "
            "(from bytes decoded with errors='surrogateescape'?); return bytes, or text without it."
        ) from None


def _latin1(text: str, what: str) -> bytes:
    """A header's value as Latin-1 (HTTP's), or a HandlerError naming ``what``."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise HandlerError(
            f"The handler's {what} holds {text[exc.start]!r}, which a header cannot carry (HTTP header values are "
            "Latin-1); percent-encode it first, e.g. urllib.parse.quote(value)."
        ) from None


def _list_content(content: list[Any], lowered: str) -> bytes:
    """A list: chunks of bytes joined, CSV or JSON lines when the content type says so, else JSON."""
    if content and all(isinstance(c, bytes | bytearray) for c in content):
        return b"".join(content)
    if lowered.startswith("text/csv"):
        return dump_csv(content)
    if lowered.startswith(NDJSON_TYPES):
        return b"".join(dump_json(item) + b"\n" for item in content)
    return dump_json(content)


ABEJA_KEYS = frozenset({"status_code", "content_type", "content", "metadata"})
_warned: set[frozenset[str]] = set()
MAX_WARNED = 100  # key sets remembered (a handler returning data-made keys must not grow it without end)


def _warn_unknown_keys(result: Mapping[Any, Any]) -> None:
    """Warn once per set of keys that are not read (a misspelt ``status`` answers an empty 200 without a word)."""
    unknown = frozenset(str(key) for key in result if key not in ABEJA_KEYS)
    if unknown in _warned or len(_warned) >= MAX_WARNED:
        return
    _warned.add(unknown)
    import difflib  # lazy: only for a warning's suggestion; a few milliseconds of every start otherwise

    hints = []
    for key in sorted(unknown):
        close = difflib.get_close_matches(key, sorted(ABEJA_KEYS), n=1, cutoff=0.5)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    log.warning(
        "The handler returned keys that are not read: %s; an ABEJA handler's return is read for 'status_code', "
        "'content_type', 'content' and 'metadata' (this warning is given once for these keys).",
        ", ".join(hints),
    )


def _status(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 200 <= int(value) <= 599:
        raise HandlerError(
            f"The handler's 'status_code' is {value!r}; expected an int or http.HTTPStatus from 200 to 599 "
            "(a 1xx status is informational: it cannot end a response)."
        )
    return int(value)


def _response_status(response: Any) -> int:
    """The status of a Starlette Response returned by user code, checked as uvicorn would not (it drops the
    connection without a word on a status it cannot write or a header with a line break)."""
    status = response.status_code
    if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
        raise HandlerError(f"The returned {type(response).__name__} has status_code {status!r}; expected 200 to 599.")
    for name, header in response.raw_headers:
        if _BAD_VALUE.search(header.decode("latin-1")) or _BAD_VALUE.search(name.decode("latin-1")):
            raise HandlerError(
                f"The returned {type(response).__name__}'s header {name.decode('latin-1')!r} contains a line break "
                "or control character."
            )
    return status


def _metadata_headers(metadata: Any) -> list[tuple[bytes, bytes]]:
    if metadata is None:
        return []
    if not isinstance(metadata, Mapping):
        raise HandlerError(f"The handler's 'metadata' is {_type_name(metadata)}; expected a dict of response headers.")
    headers = []
    for key, value in metadata.items():
        name = key.decode("latin-1") if isinstance(key, bytes) else str(key)
        if not name or any(c in name for c in ' \t\r\n:"(),/;<=>?@[\\]{}') or not name.isascii():
            raise HandlerError(f"The handler's 'metadata' key {name!r} is not a valid HTTP header name.")
        if name.lower() in SERVER_HEADERS:
            hint = "use 'content_type' for it" if name.lower() == "content-type" else _SET_BY_US[name.lower()]
            raise HandlerError(f"The handler's 'metadata' key {name!r} is a header localserve sets itself; {hint}.")
        if isinstance(value, bytes):
            text = value.decode("latin-1")
        elif isinstance(value, str | int | float):
            text = str(value)
        else:
            raise HandlerError(
                f"The handler's 'metadata' value for {name!r} is {_type_name(value)}; expected a string (or a number)."
            )
        if _BAD_VALUE.search(text):
            raise HandlerError(
                f"The handler's 'metadata' value for {name!r} contains a line break or control character."
            )
        headers.append((name.lower().encode("latin-1"), _latin1(text, f"'metadata' value for {name!r}")))
    return headers


# -- Cortex --------------------------------------------------------------------------------


def cortex_reply(value: Any, accept: str | None = None) -> Reply:
    """Render a predictor's or post_inference's return (Cortex rules)."""
    if type(value) in _PLAIN:  # the common case: neither a response, a stream, text nor bytes
        if accept is not None and wants_msgpack(accept):
            return Reply(headers=[(b"content-type", MSGPACK_TYPE.encode())], body=dump_msgpack(value), value=value)
        return Reply(headers=[(b"content-type", JSON_TYPE)], body=dump_json(value), value=value)
    if _is_starlette_response(value):
        return Reply(status=_response_status(value), asgi=value, value=None)
    if isinstance(value, str):
        body = _utf8(value, "The returned text")
        return Reply(headers=[(b"content-type", b"text/plain; charset=utf-8")], body=body, value=value)
    if isinstance(value, bytes | bytearray | memoryview):
        return Reply(headers=[(b"content-type", b"application/octet-stream")], body=bytes(value), value=None)
    if _is_stream(value):
        return Reply(headers=[(b"content-type", b"application/octet-stream")], stream=_chunks(value), value=None)
    if wants_msgpack(accept):
        return Reply(headers=[(b"content-type", MSGPACK_TYPE.encode())], body=dump_msgpack(value), value=value)
    return Reply(headers=[(b"content-type", JSON_TYPE)], body=dump_json(value), value=value)


_PLAIN = frozenset({dict, list, int, float, bool, type(None)})


def _is_starlette_response(value: Any) -> bool:
    cls = type(value)
    return any(base.__module__.startswith("starlette.") and base.__name__ == "Response" for base in cls.__mro__)


def _is_stream(value: Any) -> bool:
    return isinstance(value, Iterator) or (
        isinstance(value, Iterable)
        and not isinstance(value, list | tuple | dict | set | frozenset | str | bytes)
        and not isinstance(value, np.ndarray)
        and not isinstance(value, Mapping)
    )


def _chunks(iterable: Iterable[Any]) -> Iterator[bytes]:
    try:
        for chunk in iterable:
            if isinstance(chunk, bytes | bytearray | memoryview):
                yield bytes(chunk)
            elif isinstance(chunk, str):
                yield chunk.encode("utf-8")
            else:
                yield dump_json(chunk) + b"\n"
    finally:  # closed early (the client left): close the user's generator too
        close = getattr(iterable, "close", None)
        if close is not None:
            close()


def _type_name(value: Any) -> str:
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"
