"""Content-Type -> payload, as Cortex parsed it: JSON, text (charset), forms, msgpack, else bytes."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

import orjson

from localserve.errors import RequestError, UnsupportedMediaType
from localserve.messages.error_text import short_repr
from localserve.messages.multipart import form_from_parts, parse_multipart

MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack")
MAX_JSON_DEPTH = 1024  # orjson's nesting limit
MSGPACK_DEPTH = 1024  # msgpack's C unpacker's stack


INFINITY = "write Infinity or -Infinity to mean infinity."


def _finite_float(text: str, what: str = "The body", infinity: str = INFINITY) -> float:
    """A JSON number as a float, refused when beyond a double (the standard library would make it inf)."""
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else f"{text[:37]}..."
        raise RequestError(
            f"{what} is not valid JSON: the number {shown} is beyond the range of a double (about ±1.8e308); {infinity}"
        )
    return value


def decode_payload(content_type: str | None, body: bytes) -> Any:
    """The ``payload`` a Cortex predictor or ``pre_inference`` receives for this body."""
    if not content_type:
        return body
    lowered = content_type.lower()
    if lowered.startswith("application/json"):
        return loads_json(body)
    if lowered.startswith("text/plain"):
        return _text(content_type, body)
    if lowered.startswith("multipart/form-data"):
        return form_from_parts(parse_multipart(content_type, body))
    if lowered.startswith("application/x-www-form-urlencoded"):
        from starlette.datastructures import FormData

        fields: list[tuple[str, str | Any]] = list(parse_qsl(body.decode("latin-1"), keep_blank_values=True))
        return FormData(fields)
    if lowered.startswith(MSGPACK_TYPES):
        return _msgpack(body)
    return body


def decode_json_sample(content_type: str | None, body: bytes, api: str) -> Any:
    """The sample of a ``kind: api`` request handler. JSON (as Cortex 0.8-0.11 parsed it) and msgpack are decoded,
    a multipart form is parsed and any other body (an image, ``application/octet-stream``) is its bytes, as for
    every payload; a body that came as a URL-encoded form or as text, which no JSON sample is, is refused before
    user code runs (curl's ``-d`` sends a JSON file as a form), and so is an empty one."""
    media = (content_type or "").partition(";")[0].strip().lower()
    if media == FORM or media.startswith("text/"):
        hint = " (curl -d sends that: add -H 'Content-Type: application/json')" if media == FORM else ""
        raise UnsupportedMediaType(
            f"API {api!r} reads a JSON sample, but the body came with Content-Type: {content_type}{hint}; "
            "send JSON with Content-Type: application/json (or the bytes with their own type, such as image/jpeg)."
        )
    came = f"Content-Type: {content_type}" if media else "no Content-Type"
    if not body.strip():
        raise RequestError(
            f"API {api!r} reads a JSON sample, but the body is empty (it came with {came}); "
            "send JSON with Content-Type: application/json."
        )
    if media and media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        return decode_payload(content_type, body)  # msgpack, a multipart form, or the bytes of an image
    try:
        return loads_json(body)
    except RequestError as exc:
        if media:
            raise
        raise RequestError(
            f"{exc} It came with no Content-Type; send JSON with Content-Type: application/json."
        ) from None


# What user code raises when a value is not of the shape it expected: then a 500 says how the body was read.
SHAPE_ERRORS = ("KeyError", "TypeError", "IndexError", "AttributeError")


def about_payload(message: str, where: str, content_type: str | None, payload: Any, what: str = "payload") -> str:
    """``message`` (``<where> raised <Error>: ...``) with how the body became ``payload`` when the error is one of
    a value's shape (SHAPE_ERRORS); else as it is (an error user code raised on purpose says enough)."""
    if not message.startswith(tuple(f"{where} raised {name}:" for name in SHAPE_ERRORS)):
        return message
    return f"{message} (its {what} was {describe_payload(content_type, payload)})"


def describe_payload(content_type: str | None, payload: Any) -> str:
    """How the body became the ``payload`` (or sample) user code got, for the message of a 500 where it failed on
    it: a KeyError on a form that curl's ``-d`` made of a JSON file is the client's Content-Type, not the code."""
    media = (content_type or "").partition(";")[0].strip().lower()
    if media.startswith(FORM) or media.startswith("multipart/form-data"):
        fields = list(payload.keys()) if hasattr(payload, "keys") else []
        shown = ", ".join(short_repr(k, 40) for k in fields[:3]) + (", ..." if len(fields) > 3 else "")
        hint = "; JSON is read as JSON only with Content-Type: application/json" if media == FORM else ""
        return f"the body read as a form ({media}): fields {shown or 'none'}{hint}"
    if media in MSGPACK_TYPES:
        return f"the body unpacked from msgpack: {_shape(payload)}"
    if isinstance(payload, str):
        return f"the body read as text ({media}): {len(payload)} characters"
    if isinstance(payload, bytes):
        came = f"Content-Type {media}" if media else "no Content-Type"
        return f"the body as bytes ({len(payload)} bytes; it came with {came})"
    return f"the body parsed as JSON: {_shape(payload)}"


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(short_repr(k, 40) for k in list(value)[:5]) + (", ..." if len(value) > 5 else "")
        return f"a dict with keys {keys}" if value else "a dict with no keys"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return "a string" if isinstance(value, str) else "a number"


FORM = "application/x-www-form-urlencoded"
CORTEX_GZIP = (
    "A Cortex API gets its body as sent (Content-Encoding is not decoded, as on Cortex); send the JSON uncompressed."
)


def loads_json(
    body: bytes,
    what: str = "The body",
    gzipped: str = CORTEX_GZIP,
    constant: Callable[[str], Any] | None = None,
    infinity: str = INFINITY,
) -> Any:
    """A JSON document (orjson first; the standard library for what only it takes, NaN and Infinity, and for the
    error's words): RequestError "``what`` is not valid JSON: ..." otherwise, ``gzipped`` said of a gzip stream
    and ``infinity`` of a number past a double. ``constant`` is given NaN, Infinity and -Infinity where they
    are written (the standard library's ``parse_constant``): it may refuse them."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("depth limit exceeded"):  # orjson's limit: the standard library would recurse
            raise RequestError(
                f"{what} is not valid JSON: arrays and objects are nested deeper than {MAX_JSON_DEPTH} levels "
                f"(at char {exc.pos})."
            ) from None
        # else the standard library accepts a little more (NaN, Infinity) and words the error
    try:
        return json.loads(
            body,
            parse_float=_finite_float if what == "The body" else partial(_finite_float, what=what, infinity=infinity),
            parse_constant=constant,
        )
    except UnicodeDecodeError as exc:
        if body[:2] == b"\x1f\x8b":
            raise RequestError(f"{what} is not valid JSON: it is gzip-compressed. {gzipped}") from None
        raise RequestError(f"{what} is not valid JSON: it is not UTF-8 ({exc.reason} at byte {exc.start}).") from None
    except json.JSONDecodeError as exc:
        raise RequestError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} (char {exc.pos})."
        ) from None
    except RecursionError:
        raise RequestError(
            f"{what} is not valid JSON: arrays and objects are nested deeper than {MAX_JSON_DEPTH} levels."
        ) from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
        raise RequestError(f"{what} is not valid JSON: {_int_limit(exc)}.") from None


def _text(content_type: str, body: bytes) -> str:
    """A text body decoded with its charset (UTF-8 when it names none)."""
    charset = _param(content_type, "charset") or "utf-8"
    try:
        return body.decode(charset)
    except LookupError:
        raise RequestError(f"Unknown charset {charset!r} in Content-Type {content_type!r}.", status_code=415) from None
    except UnicodeDecodeError as exc:
        raise RequestError(
            f"The text body is not valid {charset}: byte {body[exc.start]:#04x} at position {exc.start}."
        ) from None


def _msgpack(body: bytes) -> Any:
    """A msgpack body; every way it can be wrong said in words."""
    import msgpack

    try:
        return msgpack.unpackb(body, raw=False)
    except (RecursionError, msgpack.StackError):
        raise RequestError(
            f"The body is not valid msgpack: arrays and maps are nested deeper than {MSGPACK_DEPTH} levels."
        ) from None
    except Exception as exc:  # msgpack raises several unrelated types
        raise RequestError(f"The body is not valid msgpack: {_msgpack_reason(exc, body)}.") from None


def _msgpack_reason(exc: Exception, body: bytes) -> str:
    """msgpack's error in the words of someone who sent the body (its own: "FormatError", "received extra data.")."""
    import msgpack

    text = str(exc)
    if isinstance(exc, msgpack.ExtraData):
        return f"it holds more than one value (the first ends at byte {len(body) - len(exc.extra)} of {len(body)})"
    if isinstance(exc, msgpack.FormatError):
        return "it holds a byte that begins no msgpack value (0xc1 is never used)"
    if isinstance(exc, UnicodeDecodeError):
        return f"a string is not UTF-8 ({exc.reason}); send binary data as msgpack bin, not str"
    if "incomplete input" in text:
        return f"it ends inside a value ({len(body)} bytes)"
    if "is not allowed for map key" in text:
        kind = text.split()[0]
        article = "an" if kind[:1] in "aeiou" else "a"
        return f"a map key is {article} {kind}; map keys must be strings or binary (msgpack str or bin)"
    if "exceeds max_" in text:
        return f"it announces more items or bytes ({text.split()[0]}) than its {len(body)} bytes can hold"
    return text.rstrip(".") or type(exc).__name__


def _int_limit(exc: ValueError) -> str:
    text = str(exc)
    if "integer string conversion" in text:
        return f"an integer has more than {sys.get_int_max_str_digits()} digits"
    return text


def _param(content_type: str, name: str) -> str | None:
    for piece in content_type.split(";")[1:]:
        key, _, value = piece.partition("=")
        if key.strip().lower() == name:
            return value.strip().strip('"') or None
    return None
