"""Requests and answers of the Open Inference Protocol (KServe V2) to and from numpy: the JSON header, its
inputs decoded into a model's feed (JSON data here, binary data in ``binary``), and the answer encoded.

Every check on a hostile body compares numbers (Python integers: a shape whose product overflows
int64 is only a large number) before anything is allocated from them: an array is only ever made
from bytes that came in the body, so no header can make the server allocate more than it received.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from localserve.errors import RequestError
from localserve.messages.arrays import to_array
from localserve.messages.error_text import short_repr
from localserve.protocols.v2.binary import binary_of, binary_size, from_binary, read_json_header
from localserve.protocols.v2.tensors import (
    DATATYPES,
    MAX_DIM,
    Requested,
    TensorSpec,
    checked_shape,
    count_error,
    datatype_of,
    expected_inputs,
)


@dataclass(frozen=True)
class Decoded:
    """A decoded inference request: the model's feed and how to answer."""

    feed: dict[str, np.ndarray[Any, Any]]
    id: str | None
    outputs: list[Requested]


_OPTIONAL = {"id": "a string", "outputs": "a list of objects with a 'name'"}


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
    header = read_json_header(json_part, header_length)
    if not isinstance(header, dict):
        raise RequestError(f"The request must be a JSON object with 'inputs'; got {_kind(header)}.")
    for key, expected in _OPTIONAL.items():  # left out, each has a default; null is not one (as in Triton)
        if key in header and header[key] is None:
            raise RequestError(f"The request's {key!r} must be {expected}, or left out; got null.")
    request_id = header.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise RequestError(f"The request's 'id' must be a string; got {_kind(request_id)}.")
    parameters = _parameters(header, "the request")
    default_binary = _flag(parameters, "binary_data_output", "the request")
    given = header.get("inputs")
    if not isinstance(given, list):
        raise RequestError(f"The request's 'inputs' must be a list of tensors; got {_kind(given)}.")
    feed = _feed(given, inputs, binary, keep_bytes=keep_bytes)
    return Decoded(feed, request_id, _requested(header.get("outputs"), outputs, default_binary))


def _feed(
    given: list[Any], inputs: Sequence[TensorSpec], binary: memoryview, *, keep_bytes: bool
) -> dict[str, np.ndarray[Any, Any]]:
    """The model's feed from the request's inputs, each from its JSON 'data' or its bytes of the binary part."""
    specs = {spec.name: spec for spec in inputs}
    feed: dict[str, np.ndarray[Any, Any]] = {}
    offset = 0
    for index, item in enumerate(given):
        name, spec, shape = _input(item, index, specs, inputs, feed)
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
        feed[name] = from_binary(spec, shape, binary[offset : offset + size], keep_bytes=keep_bytes)
        offset += size
    missing = [spec.name for spec in inputs if spec.name not in feed]
    if missing:
        raise RequestError(f"Input {missing[0]!r} is missing; the model expects {expected_inputs(inputs)}.")
    if offset != len(binary):
        raise RequestError(
            f"The body has {len(binary)} bytes after the JSON header but the inputs' binary_data_size add up to "
            f"{offset}; they must be equal."
        )
    return feed


def _input(
    item: Any, index: int, specs: Mapping[str, TensorSpec], inputs: Sequence[TensorSpec], seen: Container[str]
) -> tuple[str, TensorSpec, tuple[int, ...]]:
    """One input's name, the model's spec of it and its shape, checked against the spec."""
    if not isinstance(item, dict):
        raise RequestError(f"Input {index} of the request must be an object; got {_kind(item)}.")
    name = item.get("name")
    if not isinstance(name, str):
        raise RequestError(f"Input {index} of the request needs a 'name' string; got {_kind(name)}.")
    spec = specs.get(name)
    if spec is None:
        raise RequestError(f"Unknown input {name!r}; the model expects {expected_inputs(inputs)}.")
    if name in seen:
        raise RequestError(f"Input {name!r} is given twice; each input must be given once.")
    shape = _shape(item.get("shape"), spec)
    datatype = item.get("datatype")
    if datatype != spec.datatype:
        given = f"datatype {datatype!r}" if "datatype" in item else "no 'datatype'"
        raise RequestError(f"Input {name!r} has {given}; the model expects {spec.datatype} for it.")
    return name, spec, shape


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
        if any(seen.name == name for seen in requested):  # 100 copies of one output would answer 100 tensors
            raise RequestError(f"Output {name!r} is requested twice; name each output once.")
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
    if "parameters" not in item:
        return {}
    parameters = item["parameters"]
    if parameters is None:
        raise RequestError(f"The 'parameters' of {what} must be an object, or left out; got null.")
    if not isinstance(parameters, dict):
        raise RequestError(f"The 'parameters' of {what} must be an object; got {_kind(parameters)}.")
    return parameters


def _flag(parameters: Mapping[str, Any], key: str, what: str) -> bool:
    value = parameters.get(key, False)
    if not isinstance(value, bool):
        raise RequestError(f"Parameter {key!r} of {what} must be true or false; got {short_repr(value, 80)}.")
    return value


def _shape(value: Any, spec: TensorSpec) -> tuple[int, ...]:
    if isinstance(value, list):  # JSON Schema's integers (the OpenAPI document's) include 4.0
        value = [int(d) if isinstance(d, float) and d.is_integer() else d for d in value]
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        raise RequestError(
            f"Input {spec.name!r} needs a 'shape' list of whole numbers from 0 to {MAX_DIM}; got {_short(value)}."
        )
    return checked_shape(value, spec)


def _from_json(spec: TensorSpec, shape: tuple[int, ...], data: Any, *, keep_bytes: bool) -> np.ndarray[Any, Any]:
    count = math.prod(shape)
    if not isinstance(data, list):
        data = [data]  # a lone scalar
    if len(data) > count:  # a cheap early answer for flat data (nested data is counted below)
        raise RequestError(count_error(spec.name, shape, count, f"{len(data)} or more elements"))
    if spec.datatype != "BYTES" and str in set(map(type, data)):  # name the string itself, not its row
        index = next(i for i, item in enumerate(data) if isinstance(item, str))
        raise RequestError(
            f"Input {spec.name!r} is {spec.datatype}; the value {_short(data[index])} at [{index}] of its data is a "
            "string, not a number."
        )
    array = to_array(
        spec.name,
        data,
        DATATYPES[spec.datatype],
        None,
        keep_bytes=keep_bytes,
        described=lambda: f"Input {spec.name!r} is {spec.datatype} of shape {list(shape)}",
    )
    if array.size != count:
        raise RequestError(count_error(spec.name, shape, count, f"{array.size} elements"))
    return array.reshape(shape)


# -- the answer --------------------------------------------------------------------------------------


def encode_response(
    model_name: str,
    request_id: str | None,
    outputs: Sequence[tuple[Requested, Any]],
    *,
    version: str = "1",
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
            chunk = binary_of(array, datatype)
            entry["parameters"] = {"binary_data_size": len(chunk)}
            chunks.append(chunk)
        else:
            entry["data"] = _json_data(requested.name, array, datatype)
        entries.append(entry)
    answer: dict[str, Any] = {"model_name": model_name, "model_version": version}
    if request_id is not None:
        answer["id"] = request_id
    answer["outputs"] = entries
    header = orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)
    if not chunks:
        return header, None
    return header + b"".join(chunks), len(header)


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


def _short(value: Any) -> str:
    return short_repr(value, 80)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), f"a {type(value).__name__}")
