"""Content-Type -> payload, as Cortex parsed it: JSON, text (charset), forms, msgpack, else bytes."""

from __future__ import annotations

import json
import sys
from typing import Any
from urllib.parse import parse_qsl

import orjson

from localserve.errors import RequestError
from localserve.request import Content

MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack")
MAX_JSON_DEPTH = 1024  # orjson's nesting limit
MSGPACK_DEPTH = 1024  # msgpack's C unpacker's stack


def decode_payload(content_type: str | None, body: bytes) -> Any:
    """The ``payload`` a Cortex predictor or ``pre_inference`` receives for this body."""
    if not content_type:
        return body
    lowered = content_type.lower()
    if lowered.startswith("application/json"):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            if exc.msg.startswith("depth limit exceeded"):  # orjson's limit: the standard library would recurse
                raise RequestError(
                    f"The body is not valid JSON: arrays and objects are nested deeper than {MAX_JSON_DEPTH} levels "
                    f"(at char {exc.pos})."
                ) from None
            # else the standard library accepts a little more (NaN, Infinity) and words the error
        try:
            return json.loads(body)
        except UnicodeDecodeError as exc:
            raise RequestError(
                f"The body is not valid JSON: it is not UTF-8 ({exc.reason} at byte {exc.start})."
            ) from None
        except json.JSONDecodeError as exc:
            raise RequestError(
                f"The body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} (char {exc.pos})."
            ) from None
        except RecursionError:
            raise RequestError(
                f"The body is not valid JSON: arrays and objects are nested deeper than {MAX_JSON_DEPTH} levels."
            ) from None
        except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
            raise RequestError(f"The body is not valid JSON: {_int_limit(exc)}.") from None
    if lowered.startswith("text/plain"):
        charset = _param(content_type, "charset") or "utf-8"
        try:
            return body.decode(charset)
        except LookupError:
            raise RequestError(
                f"Unknown charset {charset!r} in Content-Type {content_type!r}.", status_code=415
            ) from None
        except UnicodeDecodeError as exc:
            raise RequestError(
                f"The text body is not valid {charset}: byte {body[exc.start]:#04x} at position {exc.start}."
            ) from None
    if lowered.startswith("multipart/form-data"):
        return form_from_parts(parse_multipart(content_type, body))
    if lowered.startswith("application/x-www-form-urlencoded"):
        from starlette.datastructures import FormData

        fields: list[tuple[str, str | Any]] = list(parse_qsl(body.decode("latin-1"), keep_blank_values=True))
        return FormData(fields)
    if lowered.startswith(MSGPACK_TYPES):
        import msgpack

        try:
            return msgpack.unpackb(body, raw=False)
        except (RecursionError, msgpack.StackError):
            raise RequestError(
                f"The body is not valid msgpack: arrays and maps are nested deeper than {MSGPACK_DEPTH} levels."
            ) from None
        except Exception as exc:  # msgpack raises several unrelated types
            reason = str(exc) or type(exc).__name__
            raise RequestError(f"The body is not valid msgpack: {reason}.") from None
    return body


def parse_multipart(content_type: str, body: bytes) -> list[Content]:
    """Split a multipart/form-data body into its parts; a malformed body is a 400 that says why."""
    from python_multipart.multipart import MultipartParser, parse_options_header

    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise RequestError(
            f"Malformed multipart body: Content-Type {content_type!r} has no boundary parameter; "
            "expected e.g. 'multipart/form-data; boundary=...'."
        )
    parts: list[Content] = []
    state: dict[str, Any] = {"ended": False}
    header_field = bytearray()
    header_value = bytearray()
    headers: dict[bytes, bytes] = {}
    data = bytearray()

    def on_part_begin() -> None:
        headers.clear()
        data.clear()

    def on_header_field(buf: bytes, start: int, end: int) -> None:
        header_field.extend(buf[start:end])

    def on_header_value(buf: bytes, start: int, end: int) -> None:
        header_value.extend(buf[start:end])

    def on_header_end() -> None:
        headers[bytes(header_field).lower()] = bytes(header_value)
        header_field.clear()
        header_value.clear()

    def on_part_data(buf: bytes, start: int, end: int) -> None:
        data.extend(buf[start:end])

    def on_part_end() -> None:
        _, options = parse_options_header(headers.get(b"content-disposition", b""))
        part_type = headers.get(b"content-type")
        name = options.get(b"name")
        filename = options.get(b"filename")
        parts.append(
            Content(
                part_type.decode("latin-1") if part_type else None,
                name.decode("utf-8", "replace") if name is not None else None,
                filename.decode("utf-8", "replace") if filename is not None else None,
                bytes(data),
            )
        )

    def on_end() -> None:
        state["ended"] = True

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
            "on_end": on_end,
        },
        max_header_count=64,
        max_header_size=16384,
    )
    try:
        parser.write(body)
        parser.finalize()
    except Exception as exc:  # python-multipart raises MultipartParseError and friends
        raise RequestError(f"Malformed multipart body: {exc}.") from None
    if not state["ended"]:
        raise RequestError(
            f"Malformed multipart body: the closing boundary '--{boundary.decode('latin-1')}--' was not found "
            f"({len(parts)} complete part(s) read)."
        )
    return parts


def form_from_parts(parts: list[Content]) -> Any:
    """Starlette FormData (what Cortex's server handed over): files as UploadFile, fields as str."""
    import io

    from starlette.datastructures import FormData, Headers, UploadFile

    items: list[tuple[str, str | UploadFile]] = []
    for part in parts:
        if part["file_name"] is not None:
            headers = Headers({"content-type": part["content_type"]}) if part["content_type"] else None
            upload = UploadFile(io.BytesIO(part.body), size=len(part.body), filename=part["file_name"], headers=headers)
            items.append((part["form_name"] or "", upload))
        else:
            items.append((part["form_name"] or "", part.body.decode("utf-8", "replace")))
    return FormData(items)


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
