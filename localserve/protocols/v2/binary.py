"""The binary tensor data extension of the Open Inference Protocol: raw tensors after the JSON header.

``Inference-Header-Content-Length`` says where the JSON ends (``read_json_header``); each binary input gives its byte
count in ``parameters.binary_data_size``, and the tensors follow in the inputs' order, little-endian, a BYTES element as
a 4-byte length then its bytes. An array is only made from bytes that came in the body, once their count matched its
shape.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np
import orjson

from localserve.errors import RequestError
from localserve.messages.payload import loads_json
from localserve.protocols.v2.tensors import DATATYPES, TensorSpec

HEADER_LENGTH = b"inference-header-content-length"
_LENGTH = struct.Struct("<I")


def read_json_header(json_part: bytes | memoryview, header_length: int | None) -> Any:
    """The request's JSON header, or a RequestError that says what is wrong with it: where orjson refuses it,
    in the words of ``payload.loads_json`` (a Cortex body's), NaN and Infinity named, which Triton's JSON
    parser refuses too (docs/reference/open-inference-protocol.md), and a body that may hold binary tensor data told of its header.
    """
    try:
        return orjson.loads(json_part)
    except orjson.JSONDecodeError as exc:
        refused = exc.msg
    what = "The request's JSON header" + ("" if header_length is None else f" (the first {header_length} bytes)")

    def refuse(constant: str) -> NoReturn:
        raise RequestError(
            f"{what} is not valid JSON: {constant} is not a JSON number, and the Open Inference Protocol's JSON has "
            "no NaN or Infinity (as Triton's); send such values as binary tensor data."
        )

    try:
        loads_json(bytes(json_part), what, GZIPPED, refuse, INFINITY)
    except RequestError as exc:
        if header_length is None and ("not UTF-8" in str(exc) or "Extra data" in str(exc)):
            raise RequestError(
                f"{exc} A body with binary tensor data gives the length of its JSON header in the "
                "Inference-Header-Content-Length header."
            ) from None
        raise
    # The standard library took what orjson would not: a string escape of half a surrogate pair ("\ud800"),
    # which is no character, and which neither the answer (its id) nor a BYTES tensor could then carry.
    half = " (a \\u escape of half a surrogate pair, which is no character)" if "surrogate" in refused else ""
    raise RequestError(f"{what} is not valid JSON for this protocol: {refused}{half}.")


GZIPPED = "Name its encoding in Content-Encoding (gzip or deflate), or send it uncompressed."
INFINITY = "send infinities as binary tensor data."


def parse_header_length(value: bytes | None, body_size: int) -> int | None:
    """``Inference-Header-Content-Length`` as an int in [0, body_size], or RequestError (400)."""
    if value is None:
        return None
    text = value.decode("latin-1").strip()
    if not text.isascii() or not text.isdigit() or len(text) > 20:
        raise RequestError(
            f"Inference-Header-Content-Length {text[:40]!r} is not a byte count; expected a whole number from 0 to "
            f"the body's {body_size} bytes."
        )
    length = int(text)
    if length > body_size:
        raise RequestError(
            f"Inference-Header-Content-Length {length} is past the end of the body ({body_size} bytes); it must "
            "count the bytes of the JSON header that starts the body."
        )
    return length


def binary_size(parameters: Mapping[str, Any], name: str) -> int | None:
    """An input's ``binary_data_size`` (None when its data is JSON)."""
    if "binary_data_size" not in parameters:
        return None
    size = parameters["binary_data_size"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise RequestError(
            f"Input {name!r} has binary_data_size {size!r}; expected a whole number of bytes, 0 or more."
        )
    return size


def from_binary(
    spec: TensorSpec, shape: tuple[int, ...], data: memoryview, *, keep_bytes: bool
) -> np.ndarray[Any, Any]:
    """An input's array from its bytes of the binary part, their count checked against its shape."""
    count = math.prod(shape)
    if spec.datatype == "BYTES":
        return bytes_elements(spec.name, shape, count, data, keep_bytes=keep_bytes, where="binary data")
    dtype = DATATYPES[spec.datatype]
    if len(data) != count * dtype.itemsize:
        raise RequestError(
            f"Input {spec.name!r} has binary_data_size {len(data)}, but shape {list(shape)} of {spec.datatype} takes "
            f"{count} x {dtype.itemsize} = {count * dtype.itemsize} bytes."
        )
    if spec.datatype == "BOOL":
        raw = np.frombuffer(data, dtype=np.uint8)
        bad = np.flatnonzero(raw > 1)
        if bad.size:
            raise RequestError(
                f"Input {spec.name!r} is BOOL but byte {int(bad[0])} of its binary data is {int(raw[bad[0]])}; "
                "BOOL elements are one byte, 0 or 1."
            )
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def bytes_elements(
    name: str, shape: tuple[int, ...], count: int, data: bytes | memoryview, *, keep_bytes: bool, where: str
) -> np.ndarray[Any, Any]:
    """BYTES elements, each a 4-byte little-endian length then that many bytes, as an object array of ``shape``.

    REST's binary data and gRPC's raw contents both carry them so; ``where`` names them in the
    messages ("binary data" or "raw contents"). At most ``count`` + 1 elements are read.
    """
    has = "has" if where.endswith("data") else "have"  # "binary data has", "raw contents have"
    if count * _LENGTH.size > len(data):  # each element takes at least its 4-byte length
        raise RequestError(
            f"Input {name!r} has shape {list(shape)}, which holds {count} elements, but its {where} {has} "
            f"{len(data)} bytes, room for at most {len(data) // _LENGTH.size}."
        )
    elements: list[Any] = []
    position = 0
    while position < len(data) and len(elements) <= count:
        if len(data) - position < _LENGTH.size:
            raise RequestError(
                f"Input {name!r} (BYTES) ends with {len(data) - position} stray bytes; each element is a 4-byte "
                "little-endian length then that many bytes."
            )
        (length,) = _LENGTH.unpack_from(data, position)
        position += _LENGTH.size
        if length > len(data) - position:
            raise RequestError(
                f"Element {len(elements)} of input {name!r} (BYTES) says {length} bytes but only "
                f"{len(data) - position} are left in its {where}."
            )
        elements.append(bytes_element(name, len(elements), bytes(data[position : position + length]), keep_bytes))
        position += length
    if len(elements) != count:
        got = f"{len(elements)} or more elements" if len(elements) > count else f"{len(elements)} elements"
        raise RequestError(
            f"Input {name!r} has shape {list(shape)}, which holds {count} elements, but its {where} {has} {got}."
        )
    array = np.empty(count, dtype=object)
    array[:] = elements
    return array.reshape(shape)


def bytes_element(name: str, index: int, raw: bytes, keep_bytes: bool) -> bytes | str:
    """One BYTES element: kept as bytes (TensorFlow), else decoded as UTF-8 (a 400 naming it when it is not)."""
    if keep_bytes:
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(
            f"Element {index} of input {name!r} (BYTES) is not valid UTF-8; this model's string inputs take text."
        ) from None


def binary_of(array: np.ndarray[Any, Any], datatype: str) -> bytes:
    """An output's bytes for the binary part (BYTES elements each after its 4-byte length)."""
    if datatype != "BYTES":
        return np.ascontiguousarray(array, dtype=DATATYPES[datatype]).tobytes()
    parts: list[bytes] = []
    for item in array.flat:
        data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
        parts.append(_LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)
