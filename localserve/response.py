"""Whatever user code returned -> a Reply (status, headers, body or stream) the server can send."""

from __future__ import annotations

import csv
import datetime
import decimal
import difflib
import enum
import io
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from localserve.errors import HandlerError

JSON_TYPE = b"application/json"
MSGPACK_TYPE = "application/msgpack"
NDJSON_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-jsonlines")
SERVER_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "content-type", "x-request-id"})
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
ABEJA_KEYS = frozenset({"status_code", "content_type", "content", "metadata"})
HIDDEN_ERROR = "Internal error: the server log has the details under this request id (--hide-errors)."
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


NO_BODY = frozenset({204, 304})  # statuses whose responses carry no body, nor a Content-Length (RFC 9110)


def answer_headers(reply: Reply, request_id: str | None) -> list[tuple[bytes, bytes]]:
    """``reply``'s headers as sent: its own, then content-length and (given an id) x-request-id."""
    headers = list(reply.headers)
    if reply.status not in NO_BODY:
        headers.append((b"content-length", str(len(reply.body)).encode()))
    if request_id is not None:
        headers.append((b"x-request-id", request_id.encode("latin-1")))
    return headers


def json_default(value: Any) -> Any:
    """json.dumps hook: numpy arrays and scalars, datetimes, decimals, sets, bytes, enums."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SO":
            return [json_default(v) if isinstance(v, bytes | np.ndarray) else v for v in value.tolist()]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            pass
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dump_json(value: Any) -> bytes:
    """Compact UTF-8 JSON, byte for byte as the standard library writes it (as the platforms did).

    (orjson writes most of it, see ``_dumps``.)
    NaN and ±Infinity are not JSON: they are written as ``null`` and a warning names where
    they were, so a client's JSON parser never fails on what we send.
    """
    try:
        return _dumps(value)
    except UnicodeEncodeError:  # a lone surrogate (JSON input may carry one): written as a \\u escape
        return json.dumps(value, default=json_default, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as exc:
        if "Out of range float values" not in str(exc):
            raise HandlerError(f"The response cannot be serialised as JSON: {exc}.") from None
    except TypeError as exc:
        raise HandlerError(f"The response cannot be serialised as JSON: {exc}.") from None
    except RecursionError:
        raise HandlerError("The response cannot be serialised as JSON: it is nested too deeply.") from None
    found: list[str] = []
    plain = _without_non_finite(json.loads(json.dumps(value, default=json_default)), "$", found)
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    log.warning("the response holds NaN or Infinity, which JSON cannot carry; sent as null: %s", shown)
    return _dumps(plain)


def _dumps(value: Any) -> bytes:
    """orjson's bytes when they are the standard library's, else the standard library's.

    orjson writes floats below 1e-4 and from 1e16 differently (``0.00001`` for ``1e-05``,
    ``1e16`` for ``1e+16``), writes NaN as null where the standard library refuses it (and
    ``dump_json`` then warns), and refuses what the standard library may still write (big
    integers, keys that are not strings). Any output where one of these could hide (a digit
    before an ``e``, ``.0000``, ``null``) is written again by the standard library, so the bytes
    are always the standard library's (tests/test_response.py compares them over many values).
    """
    try:
        out: bytes = orjson.dumps(value, default=json_default, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: the standard library decides (and words any error)
        pass
    else:
        if _NOT_ORJSON.search(out) is None:
            return out
    return _ENCODER.encode(value).encode("utf-8")


_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS  # both to json_default
_NOT_ORJSON = re.compile(rb"[0-9]e|\.0000|null")  # where orjson's bytes may differ from the standard library's


# Made once: json.dumps with any option builds a new JSONEncoder on every call (a third of its time here).
_ENCODER = json.JSONEncoder(default=json_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _without_non_finite(value: Any, path: str, found: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        found.append(f"{path} ({value})")
        return None
    if isinstance(value, dict):
        return {k: _without_non_finite(v, f"{path}.{k}", found) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_non_finite(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def dump_msgpack(value: Any) -> bytes:
    """``value`` as msgpack (numpy arrays as lists); a HandlerError when it cannot be."""
    import msgpack

    try:
        return msgpack.packb(value, default=_msgpack_default, use_bin_type=True)  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise HandlerError(f"The response cannot be serialised as msgpack: {exc}.") from None


def _msgpack_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return json_default(value)


def wants_msgpack(accept: str | None) -> bool:
    """Whether an Accept header asks for msgpack: named with a q above 0, and no lower than JSON's.

    ``application/msgpack;q=0, application/json`` refuses msgpack; ``application/msgpack,
    application/json`` (equal weights) gets it, as it always did.
    """
    if accept is None or "msgpack" not in accept:
        return False
    weights: dict[str, float] = {}
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        weights[media.lower()] = max(q, weights.get(media.lower(), 0.0))
    msgpack_q = max(weights.get("application/msgpack", 0.0), weights.get("application/x-msgpack", 0.0))
    json_q = weights.get("application/json", weights.get("application/*", weights.get("*/*", 0.0)))
    return msgpack_q > 0 and msgpack_q >= json_q


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
    headers = [(b"content-type", content_type.encode("latin-1", "replace"))]
    headers.extend(_metadata_headers(result.get("metadata")))
    content = result.get("content")
    reply = Reply(status=status, headers=headers, value=content)
    lowered = content_type.lower()
    if content is None:
        pass
    elif isinstance(content, bytes | bytearray | memoryview):
        reply.body = bytes(content)  # Decision 1: bytes are sent as bytes
    elif isinstance(content, str):
        reply.body = content.encode("utf-8")
    elif hasattr(content, "read"):
        data = content.read()
        reply.body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    elif isinstance(content, list) and content and all(isinstance(c, bytes | bytearray) for c in content):
        reply.body = b"".join(content)
    elif isinstance(content, list) and lowered.startswith("text/csv"):
        reply.body = _csv(content)
    elif isinstance(content, list) and lowered.startswith(NDJSON_TYPES):
        reply.body = b"".join(dump_json(item) + b"\n" for item in content)
    elif _is_stream(content):
        reply.stream = _chunks(content)  # Decision 3: generators are streamed
    else:
        reply.body = dump_json(content)
    if status in NO_BODY and (reply.body or reply.stream is not None):
        what = "a generator" if reply.stream is not None else f"{len(reply.body)} bytes"
        log.warning(
            "The handler answered %d with content (%s); a %d has no body, so it was dropped.", status, what, status
        )
        reply.body, reply.stream = b"", None
    return reply


ABEJA_KEYS = frozenset({"status_code", "content_type", "content", "metadata"})
_warned: set[frozenset[str]] = set()
MAX_WARNED = 100  # key sets remembered (a handler returning data-made keys must not grow it without end)


def _warn_unknown_keys(result: Mapping[Any, Any]) -> None:
    """Warn once per set of keys that are not read (a misspelt ``status`` answers an empty 200 without a word)."""
    unknown = frozenset(str(key) for key in result if key not in ABEJA_KEYS)
    if unknown in _warned or len(_warned) >= MAX_WARNED:
        return
    _warned.add(unknown)
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
            raise HandlerError(
                f"The handler's 'metadata' key {name!r} is a header localserve sets itself; "
                "use 'content_type' for the Content-Type."
            )
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
        try:
            encoded = text.encode("latin-1")
        except UnicodeEncodeError as exc:
            raise HandlerError(
                f"The handler's 'metadata' value for {name!r} holds {text[exc.start]!r}, which a header cannot carry "
                "(HTTP header values are Latin-1); percent-encode it first, e.g. urllib.parse.quote(value)."
            ) from None
        headers.append((name.lower().encode("latin-1"), encoded))
    return headers


def _csv(rows: list[Any]) -> bytes:
    out = io.StringIO()
    if rows and all(isinstance(r, Mapping) for r in rows):
        fieldnames: list[str] = []
        for row in rows:
            fieldnames.extend(k for k in row if k not in fieldnames)
        writer = csv.DictWriter(out, fieldnames=fieldnames, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        plain = csv.writer(out, lineterminator="\n")
        for row in rows:
            plain.writerow(row if isinstance(row, list | tuple) else [row])
    return out.getvalue().encode("utf-8")


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
        return Reply(headers=[(b"content-type", b"text/plain; charset=utf-8")], body=value.encode("utf-8"), value=value)
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


MAX_ERROR_CHARS = 10_000  # of an error's message sent to the client


def error_message(exc: Exception, hide_errors: bool) -> str:
    """What a client is told of an error: its message (cut at ``MAX_ERROR_CHARS``), or with ``--hide-errors``
    nothing of a 500's text."""
    if hide_errors and getattr(exc, "status_code", 500) == 500:
        return HIDDEN_ERROR
    text = str(exc)
    if len(text) > MAX_ERROR_CHARS:  # a handler raising with a 10 MB message would answer 10 MB
        text = f"{text[:MAX_ERROR_CHARS]}... ({len(text) - MAX_ERROR_CHARS:,} more characters cut)"
    return text


_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/])(?:/[^\s'\"/:,;()]+)+/(?=[^\s'\"/:,;()])")


def without_paths(text: str, project: Path) -> str:
    """``text`` for clients: paths inside the project made relative, other absolute folders dropped.

    Model and handler load failures name files; the log keeps the full paths, what a client
    sees (503 bodies, /readyz) does not disclose the server's layout.
    """
    text = text.replace(f"{project}{os.sep}", "").replace(str(project), ".")
    return _ABSOLUTE_PATH.sub("", text)


def error_body(message: str, request_id: str) -> bytes:
    """The JSON body of every error response: ``{"error": message, "request_id": ...}``.

    A message may hold lone surrogates (an exception naming a file whose name is not UTF-8, made
    by ``os.fsdecode``): UTF-8 cannot carry them, so such a body is written with JSON's escapes.
    """
    document = {"error": message, "request_id": request_id}
    try:
        return json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(document).encode("ascii")


def _type_name(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"
