"""Tensors of the Open Inference Protocol (KServe V2) to and from numpy: JSON and the binary extension.

A request body is a JSON header, optionally followed by raw tensors (the binary tensor data
extension): ``Inference-Header-Content-Length`` says where the JSON ends, and each binary input
says its byte count in ``parameters.binary_data_size``; the tensors follow in the order of the
inputs, little-endian, BYTES elements each a 4-byte little-endian length then the bytes.

Every check on a hostile body compares numbers (Python integers: a shape whose product overflows
int64 is only a large number) before anything is allocated from them: an array is only ever made
from bytes that came in the body, so no header can make the server allocate more than it received.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from localserve.errors import RequestError
from localserve.runtimes.arrays import STRING, to_array

HEADER_LENGTH = b"inference-header-content-length"
MAX_DIM = 2**63 - 1  # numpy's and onnxruntime's dimensions are int64

DATATYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BYTES": STRING,
}
"""V2 datatype -> the numpy dtype of its tensors (little-endian, as the binary extension sends them)."""

_BY_KIND = {(dtype.kind, dtype.itemsize): name for name, dtype in DATATYPES.items() if name != "BYTES"}
_TYPE_NAMES = {"string": "BYTES", **{DATATYPES[n].name: n for n in DATATYPES if n != "BYTES"}}
_LENGTH = struct.Struct("<I")


def datatype_of(dtype: np.dtype[Any]) -> str | None:
    """The V2 datatype of a numpy dtype (object and text arrays are BYTES); None when V2 has none."""
    if dtype.kind in "OUS":
        return "BYTES"
    return _BY_KIND.get((dtype.kind, dtype.itemsize))


def datatype_of_name(type_name: str) -> str | None:
    """The V2 datatype of a runtime's type name ('float32', 'string', as ``Model.describe`` writes them)."""
    return _TYPE_NAMES.get(type_name)


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a model as V2 describes it: free dimensions are -1 (None: rank unknown)."""

    name: str
    datatype: str
    shape: tuple[int, ...] | None

    def metadata(self) -> dict[str, Any]:
        """The tensor as V2 model metadata lists it: name, datatype, shape (-1 for a dynamic dimension)."""
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape or [-1])}


@dataclass(frozen=True)
class Requested:
    """An output to send back, and whether as binary data."""

    name: str
    binary: bool


@dataclass(frozen=True)
class Decoded:
    """A decoded inference request: the model's feed and how to answer."""

    feed: dict[str, np.ndarray[Any, Any]]
    id: str | None
    outputs: list[Requested]


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


def decode_request(
    body: bytes,
    header_length: int | None,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    *,
    keep_bytes: bool = False,
) -> Decoded:
    """The feed and the answer's shape of an inference request, or RequestError (400) saying what is wrong.

    ``keep_bytes``: BYTES elements stay ``bytes`` (TensorFlow); otherwise they are decoded as UTF-8
    (onnxruntime's string tensors).
    """
    view = memoryview(body)
    json_part = view if header_length is None else view[:header_length]
    binary = view[len(json_part) :]
    try:
        header = orjson.loads(json_part)
    except orjson.JSONDecodeError as exc:
        where = "" if header_length is None else f" (the first {header_length} bytes)"
        raise RequestError(f"The request's JSON header{where} is not valid JSON: {exc}.") from None
    if not isinstance(header, dict):
        raise RequestError(f"The request must be a JSON object with 'inputs'; got {_kind(header)}.")
    request_id = header.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise RequestError(f"The request's 'id' must be a string; got {_kind(request_id)}.")
    parameters = _parameters(header, "the request")
    default_binary = _flag(parameters, "binary_data_output", "the request")
    given = header.get("inputs")
    if not isinstance(given, list):
        raise RequestError(f"The request's 'inputs' must be a list of tensors; got {_kind(given)}.")
    specs = {spec.name: spec for spec in inputs}
    feed: dict[str, np.ndarray[Any, Any]] = {}
    offset = 0
    for index, item in enumerate(given):
        if not isinstance(item, dict):
            raise RequestError(f"Input {index} of the request must be an object; got {_kind(item)}.")
        name = item.get("name")
        if not isinstance(name, str):
            raise RequestError(f"Input {index} of the request needs a 'name' string; got {_kind(name)}.")
        spec = specs.get(name)
        if spec is None:
            raise RequestError(f"Unknown input {name!r}; the model expects {_expected(inputs)}.")
        if name in feed:
            raise RequestError(f"Input {name!r} is given twice; each input must be given once.")
        shape = _shape(item.get("shape"), spec)
        datatype = item.get("datatype")
        if datatype != spec.datatype:
            given = f"datatype {datatype!r}" if "datatype" in item else "no 'datatype'"
            raise RequestError(f"Input {name!r} has {given}; the model expects {spec.datatype} for it.")
        size = binary_size(_parameters(item, f"input {name!r}"), name)
        if size is None:
            if "data" not in item:
                raise RequestError(
                    f"Input {name!r} has no 'data' and no 'binary_data_size' parameter; one of them must carry "
                    "its values."
                )
            feed[name] = _from_json(spec, shape, item["data"], keep_bytes=keep_bytes)
            continue
        if "data" in item:
            raise RequestError(
                f"Input {name!r} has both 'data' and a binary_data_size parameter; its values must come one way: "
                "in 'data', or in the binary part after the JSON header."
            )
        if size > len(binary) - offset:
            raise RequestError(
                f"Input {name!r} has binary_data_size {size}, past the end of the body: {len(binary) - offset} bytes "
                "of binary data are left after the JSON header and the inputs before it."
            )
        feed[name] = _from_binary(spec, shape, binary[offset : offset + size], keep_bytes=keep_bytes)
        offset += size
    missing = [spec.name for spec in inputs if spec.name not in feed]
    if missing:
        raise RequestError(f"Input {missing[0]!r} is missing; the model expects {_expected(inputs)}.")
    if offset != len(binary):
        raise RequestError(
            f"The body has {len(binary)} bytes after the JSON header but the inputs' binary_data_size add up to "
            f"{offset}; they must be equal."
        )
    return Decoded(feed, request_id, _requested(header.get("outputs"), outputs, default_binary))


def _expected(inputs: Sequence[TensorSpec]) -> str:
    return ", ".join(f"{s.name!r} ({s.datatype} {_shape_text(s.shape)})" for s in inputs)


def binary_size(parameters: Mapping[str, Any], name: str) -> int | None:
    """An input's ``binary_data_size`` (None when its data is JSON)."""
    size = parameters.get("binary_data_size")
    if size is None:
        return None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise RequestError(
            f"Input {name!r} has binary_data_size {size!r}; expected a whole number of bytes, 0 or more."
        )
    return size


def _requested(value: Any, outputs: Sequence[TensorSpec], default_binary: bool) -> list[Requested]:
    if value is None:
        return [Requested(spec.name, default_binary) for spec in outputs]
    if not isinstance(value, list):
        raise RequestError(f"The request's 'outputs' must be a list of objects with a 'name'; got {_kind(value)}.")
    names = [spec.name for spec in outputs]
    requested: list[Requested] = []
    for index, item in enumerate(value):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str):
            raise RequestError(f"Requested output {index} needs a 'name' string; got {_kind(item)}.")
        if name not in names:
            raise RequestError(f"Unknown output {name!r}; the model's outputs are {', '.join(map(repr, names))}.")
        parameters = _parameters(item, f"output {name!r}")
        if "classification" in parameters:
            raise RequestError(
                f"Output {name!r} asks for the classification extension, which localserve does not implement; "
                "request the tensor itself."
            )
        binary = _flag(parameters, "binary_data", f"output {name!r}")
        requested.append(Requested(name, binary if "binary_data" in parameters else default_binary))
    return requested


def _parameters(item: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    parameters = item.get("parameters")
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise RequestError(f"The 'parameters' of {what} must be an object; got {_kind(parameters)}.")
    return parameters


def _flag(parameters: Mapping[str, Any], key: str, what: str) -> bool:
    value = parameters.get(key, False)
    if not isinstance(value, bool):
        raise RequestError(f"Parameter {key!r} of {what} must be true or false; got {value!r}.")
    return value


def _shape(value: Any, spec: TensorSpec) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM for d in value
    ):
        raise RequestError(
            f"Input {spec.name!r} needs a 'shape' list of whole numbers from 0 to {MAX_DIM}; got {_short(value)}."
        )
    expected = spec.shape
    if expected is not None and (
        len(value) != len(expected) or any(e >= 0 and e != d for e, d in zip(expected, value, strict=True))
    ):
        raise RequestError(
            f"Input {spec.name!r} has shape {value}; the model expects {_shape_text(expected)} (-1: any size)."
        )
    return tuple(value)


def _from_json(spec: TensorSpec, shape: tuple[int, ...], data: Any, *, keep_bytes: bool) -> np.ndarray[Any, Any]:
    count = math.prod(shape)
    if not isinstance(data, list):
        data = [data]  # a lone scalar
    if len(data) > count:  # a cheap early answer for flat data (nested data is counted below)
        raise RequestError(_count_error(spec.name, shape, count, f"{len(data)} or more elements"))
    if spec.datatype != "BYTES" and str in set(map(type, data)):  # name the string itself, not its row
        index = next(i for i, item in enumerate(data) if isinstance(item, str))
        raise RequestError(
            f"Input {spec.name!r} is {spec.datatype}; the value {_short(data[index])} at [{index}] of its data is a "
            "string, not a number."
        )
    array = to_array(spec.name, data, DATATYPES[spec.datatype], None, keep_bytes=keep_bytes)
    if array.size != count:
        raise RequestError(_count_error(spec.name, shape, count, f"{array.size} elements"))
    return array.reshape(shape)


def _from_binary(
    spec: TensorSpec, shape: tuple[int, ...], data: memoryview, *, keep_bytes: bool
) -> np.ndarray[Any, Any]:
    count = math.prod(shape)
    if spec.datatype == "BYTES":
        return _bytes_elements(spec.name, shape, count, data, keep_bytes=keep_bytes)
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


def _bytes_elements(
    name: str, shape: tuple[int, ...], count: int, data: memoryview, *, keep_bytes: bool
) -> np.ndarray[Any, Any]:
    if count * _LENGTH.size > len(data):  # each element takes at least its 4-byte length
        raise RequestError(_count_error(name, shape, count, f"{len(data)} bytes, room for at most {len(data) // 4}"))
    elements: list[Any] = []
    position = 0
    while position < len(data):
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
                f"{len(data) - position} are left in its binary data."
            )
        raw = bytes(data[position : position + length])
        position += length
        element: bytes | str = raw
        if not keep_bytes:
            try:
                element = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise RequestError(
                    f"Element {len(elements)} of input {name!r} (BYTES) is not valid UTF-8; this model's string "
                    "inputs take text."
                ) from None
        elements.append(element)
        if len(elements) > count:
            break
    if len(elements) != count:
        got = f"{len(elements)} or more elements" if len(elements) > count else f"{len(elements)} elements"
        raise RequestError(_count_error(name, shape, count, got))
    array = np.empty(count, dtype=object)
    array[:] = elements
    return array.reshape(shape)


def _count_error(name: str, shape: tuple[int, ...], count: int, got: str) -> str:
    return f"Input {name!r} has shape {list(shape)}, which holds {count} elements, but its data has {got}."


# -- the answer --------------------------------------------------------------------------------------


def encode_response(
    model_name: str,
    request_id: str | None,
    outputs: Sequence[tuple[Requested, Any]],
) -> tuple[bytes, int | None]:
    """The response body and, when any output is binary, the length of its JSON header."""
    entries: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for requested, value in outputs:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        datatype = datatype_of(array.dtype)
        if datatype is None:
            raise RequestError(
                f"Output {requested.name!r} is a {array.dtype} array, which the Open Inference Protocol has no "
                "datatype for."
            )
        entry: dict[str, Any] = {"name": requested.name, "datatype": datatype, "shape": list(array.shape)}
        if requested.binary:
            chunk = _binary_of(array, datatype)
            entry["parameters"] = {"binary_data_size": len(chunk)}
            chunks.append(chunk)
        else:
            entry["data"] = _json_data(requested.name, array, datatype)
        entries.append(entry)
    answer: dict[str, Any] = {"model_name": model_name, "model_version": "1"}
    if request_id is not None:
        answer["id"] = request_id
    answer["outputs"] = entries
    header = orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)
    if not chunks:
        return header, None
    return header + b"".join(chunks), len(header)


def _binary_of(array: np.ndarray[Any, Any], datatype: str) -> bytes:
    if datatype != "BYTES":
        return np.ascontiguousarray(array, dtype=DATATYPES[datatype]).tobytes()
    parts: list[bytes] = []
    for item in array.flat:
        data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
        parts.append(_LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def _json_data(name: str, array: np.ndarray[Any, Any], datatype: str) -> Any:
    if datatype != "BYTES":
        return np.ascontiguousarray(array).reshape(-1)  # orjson writes numpy arrays natively
    data: list[str] = []
    for item in array.flat:
        if isinstance(item, bytes | bytearray | np.bytes_):
            try:
                item = bytes(item).decode("utf-8")
            except UnicodeDecodeError:
                raise RequestError(
                    f"Output {name!r} holds bytes that are not UTF-8, which JSON cannot carry; request it with "
                    '"parameters": {"binary_data": true}.'
                ) from None
        data.append(str(item))
    return data


def _shape_text(shape: tuple[int, ...] | None) -> str:
    return "of any shape" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), f"a {type(value).__name__}")
