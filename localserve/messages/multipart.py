"""One part of a multipart/form-data body (``Content``) and the parser that splits a body into them.

Both ``request`` (``request["contents"]``) and ``payload`` (Cortex's form payload) use it, so neither
imports the other.
"""

from __future__ import annotations

import functools
import io
import logging
from typing import Any

from localserve.errors import RequestError

MAX_HEADER_COUNT = 64  # header lines of one part
MAX_HEADER_SIZE = 16384  # bytes of one part's header line
MAX_BOUNDARY = 256  # python-multipart's limit (RFC 2046 allows 70; longer ones are taken as they come)


class Content(dict[str, Any]):
    """One part of a multipart/form-data body: a dict of ``content_type``, ``form_name``, ``file_name``, and ``read()``."""

    def __init__(self, content_type: str | None, form_name: str | None, file_name: str | None, body: bytes) -> None:
        super().__init__(content_type=content_type, form_name=form_name, file_name=file_name)
        self._stream = io.BytesIO(body)
        self.body = body

    def read(self, size: int | None = -1) -> bytes:
        """Read the part's body like a file: ``size`` bytes, or the rest."""
        return self._stream.read(-1 if size is None else size)

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move in the part's body like a file."""
        return self._stream.seek(offset, whence)

    def __repr__(self) -> str:
        return f"Content({dict(self)!r}, {len(self.body)} bytes)"

    # A dict subclass is unhashable and compares by its items; two parts with equal headers but
    # different bodies must not compare equal.
    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    __hash__ = object.__hash__  # type: ignore[assignment]


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
    if len(boundary) > MAX_BOUNDARY:  # python-multipart refuses one past 256 bytes when the parser is made
        raise RequestError(
            f"Malformed multipart body: its boundary is {len(boundary)} bytes long; RFC 2046 allows at most 70."
        )
    collected = _Parts()
    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": collected.on_part_begin,
            "on_header_field": collected.on_header_field,
            "on_header_value": collected.on_header_value,
            "on_header_end": collected.on_header_end,
            "on_part_data": collected.on_part_data,
            "on_part_end": collected.on_part_end,
            "on_end": collected.on_end,
        },
        max_header_count=MAX_HEADER_COUNT,
        max_header_size=MAX_HEADER_SIZE,
    )
    _quiet_parser_log()
    try:
        parser.write(body)
        parser.finalize()
    except Exception as exc:  # python-multipart raises MultipartParseError and friends
        raise RequestError(_malformed(exc, boundary.decode("latin-1"), body)) from None
    if not collected.ended:
        raise RequestError(
            f"Malformed multipart body: the closing boundary '--{boundary.decode('latin-1')}--' was not found "
            f"({len(collected.parts)} complete part(s) read)."
        )
    return collected.parts


class _Parts:
    """python-multipart's callbacks for one body: each part's headers and data, collected as a Content."""

    def __init__(self) -> None:
        self.parts: list[Content] = []
        self.ended = False
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._headers: dict[bytes, bytes] = {}
        self._data = bytearray()

    def on_part_begin(self) -> None:
        self._headers.clear()
        self._data.clear()

    def on_header_field(self, buf: bytes, start: int, end: int) -> None:
        self._header_field.extend(buf[start:end])

    def on_header_value(self, buf: bytes, start: int, end: int) -> None:
        self._header_value.extend(buf[start:end])

    def on_header_end(self) -> None:
        self._headers[bytes(self._header_field).lower()] = bytes(self._header_value)
        self._header_field.clear()
        self._header_value.clear()

    def on_part_data(self, buf: bytes, start: int, end: int) -> None:
        self._data.extend(buf[start:end])

    def on_part_end(self) -> None:
        from python_multipart.multipart import parse_options_header

        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        part_type = self._headers.get(b"content-type")
        name = options.get(b"name")
        filename = options.get(b"filename")
        self.parts.append(
            Content(
                part_type.decode("latin-1") if part_type else None,
                name.decode("utf-8", "replace") if name is not None else None,
                filename.decode("utf-8", "replace") if filename is not None else None,
                bytes(self._data),
            )
        )

    def on_end(self) -> None:
        self.ended = True


# python-multipart's messages, in the words of someone who wrote the body (its own name bytes by
# their codes: "Expected boundary character 88, got 65 at index 4").
_REASONS: tuple[tuple[str, str], ...] = (
    (
        "Expected boundary character",
        "expected the boundary line '--{boundary}' (the boundary the Content-Type header names)",
    ),
    (
        "at end of boundary",
        "a boundary line must be '--{boundary}' followed by CRLF, or '--{boundary}--' to close the body",
    ),
    (
        "after boundary padding",
        "a boundary line must be '--{boundary}' followed by CRLF, or '--{boundary}--' to close the body",
    ),
    ("Found invalid character", "a part's header line is not 'Name: value' (invalid character in the name)"),
    ("0-length header", "a part's header line has no name (expected 'Name: value')"),
    ("at end of header", "a part's header line must end with CRLF"),
    ("Maximum header count", f"a part has more than {MAX_HEADER_COUNT} header lines"),
    ("Maximum header size", f"a part's header line is longer than {MAX_HEADER_SIZE} bytes"),
)


def _malformed(exc: Exception, boundary: str, body: bytes) -> str:
    """The 400's message for a parse error: what was wrong, where, what was found, what was expected."""
    text = str(exc)
    reason = next((r.format(boundary=boundary) for key, r in _REASONS if key in text), text.rstrip("."))
    offset = getattr(exc, "offset", None)
    if not isinstance(offset, int) or not 0 <= offset <= len(body):
        return f"Malformed multipart body: {reason}."
    line_start = body.rfind(b"\n", 0, offset) + 1
    found = body[line_start : line_start + 40]
    return (
        f"Malformed multipart body at byte {offset}: {reason}; found {found!r}. Expected parts like "
        f"'--{boundary}\\r\\nContent-Disposition: form-data; name=\"field\"\\r\\n\\r\\n<data>\\r\\n', "
        f"closed by '--{boundary}--'."
    )


@functools.cache  # once per process
def _quiet_parser_log() -> None:
    """python-multipart logs a warning before raising each parse error: the client gets the 400, the log stays quiet."""
    logger = logging.getLogger("python_multipart.multipart")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)


def form_from_parts(parts: list[Content]) -> Any:
    """Starlette FormData (what Cortex's server handed over): files as UploadFile, fields as str."""
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
