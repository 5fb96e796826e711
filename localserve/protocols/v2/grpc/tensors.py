"""Tensors of the Open Inference Protocol over gRPC to numpy: typed contents and raw contents.

A ``ModelInferRequest`` carries each input's elements either in the ``InferTensorContents`` field
of its datatype (typed) or, for every input at once, in ``raw_input_contents`` (one entry per
input, in order: little-endian elements, BYTES elements each a 4-byte little-endian length then the
bytes). FP16 has no typed field: it travels raw only. (The answer is encoded by ``outputs``.)

The checks and their words are those of the REST codec (``protocols/v2/codec.py``) wherever the
mistake is the same (an unknown input, a datatype or shape the model does not take, an unknown
output); what only gRPC has (raw contents, typed fields) is named in gRPC's own words. Every size
check compares numbers before anything is allocated from them: an array is only made from
elements or bytes that came in the message.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from localserve.errors import RequestError
from localserve.protocols.v2.binary import bytes_element, bytes_elements
from localserve.protocols.v2.grpc import inference_pb2 as pb
from localserve.protocols.v2.tensors import DATATYPES, TensorSpec, checked_shape, expected_inputs

LENGTH = struct.Struct("<I")

# datatype -> the InferTensorContents field of its elements (FP16 has none)
CONTENTS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


@dataclass(frozen=True)
class Decoded:
    """A decoded ModelInferRequest: the model's feed, the outputs to send back, and how."""

    feed: dict[str, np.ndarray[Any, Any]]
    id: str
    outputs: list[str]
    raw: bool  # the request came with raw_input_contents: answer with raw_output_contents


def decode_request(
    message: pb.ModelInferRequest,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    *,
    keep_bytes: bool = False,
) -> Decoded:
    """The feed and the answer's shape of a ModelInferRequest, or RequestError (400) saying what is wrong.

    ``keep_bytes``: BYTES elements stay ``bytes`` (TensorFlow); otherwise they are decoded as UTF-8.
    """
    raw = message.raw_input_contents
    if raw and len(raw) != len(message.inputs):
        raise RequestError(
            f"The request has {len(raw)} raw_input_contents for {len(message.inputs)} inputs; give one entry per "
            "input, in the order of 'inputs'."
        )
    specs = {spec.name: spec for spec in inputs}
    feed: dict[str, np.ndarray[Any, Any]] = {}
    for index, given in enumerate(message.inputs):
        name = given.name
        spec = specs.get(name)
        if spec is None:
            raise RequestError(f"Unknown input {name!r}; the model expects {expected_inputs(inputs)}.")
        if name in feed:
            raise RequestError(f"Input {name!r} is given twice; each input must be given once.")
        if given.datatype != spec.datatype:
            shown = f"datatype {given.datatype!r}" if given.datatype else "no 'datatype'"
            raise RequestError(f"Input {name!r} has {shown}; the model expects {spec.datatype} for it.")
        shape = checked_shape(list(given.shape), spec)
        if raw:
            if given.HasField("contents"):
                raise RequestError(
                    f"Input {name!r} has both 'contents' and an entry in raw_input_contents; when the request uses "
                    "raw_input_contents, every input's values must come that way."
                )
            feed[name] = _from_raw(spec, shape, raw[index], keep_bytes=keep_bytes)
        else:
            feed[name] = _from_contents(spec, shape, given.contents, keep_bytes=keep_bytes)
    missing = [spec.name for spec in inputs if spec.name not in feed]
    if missing:
        raise RequestError(f"Input {missing[0]!r} is missing; the model expects {expected_inputs(inputs)}.")
    return Decoded(feed, message.id, _requested(message, outputs), bool(raw))


def _requested(message: pb.ModelInferRequest, outputs: Sequence[TensorSpec]) -> list[str]:
    names = [spec.name for spec in outputs]
    if not message.outputs:
        return names
    requested: list[str] = []
    for wanted in message.outputs:
        if wanted.name not in names:
            raise RequestError(
                f"Unknown output {wanted.name!r}; the model's outputs are {', '.join(map(repr, names))}."
            )
        if wanted.name in requested:  # 100 copies of one output would answer 100 tensors
            raise RequestError(f"Output {wanted.name!r} is requested twice; name each output once.")
        if "classification" in wanted.parameters:
            raise RequestError(
                f"Output {wanted.name!r} asks for the classification extension, which localserve does not implement; "
                "request the tensor itself."
            )
        requested.append(wanted.name)
    return requested


def _from_contents(
    spec: TensorSpec, shape: tuple[int, ...], contents: pb.InferTensorContents, *, keep_bytes: bool
) -> np.ndarray[Any, Any]:
    name, datatype = spec.name, spec.datatype
    field = CONTENTS.get(datatype)
    given = [descriptor.name for descriptor, _ in contents.ListFields()]
    if field is None:
        raise RequestError(
            f"Input {name!r} is {datatype}, which has no field in 'contents'; send its values in raw_input_contents."
        )
    stray = [other for other in given if other != field]
    if stray:
        raise RequestError(
            f"Input {name!r} is {datatype}, whose values go in contents.{field}; got contents.{stray[0]}."
        )
    values = getattr(contents, field)
    count = math.prod(shape)
    if len(values) != count:
        raise RequestError(
            f"Input {name!r} has shape {list(shape)}, which holds {count} elements, but contents.{field} has "
            f"{len(values)}."
        )
    if datatype == "BYTES":
        return _object_array([bytes_element(name, i, v, keep_bytes) for i, v in enumerate(values)], shape)
    dtype = DATATYPES[datatype]
    if dtype.kind in "bf" or datatype == "UINT64":  # the field's own type, or one that holds it exactly
        return np.array(values, dtype=dtype).reshape(shape)
    wide = np.array(values, dtype=np.int64)  # int_contents, int64_contents, uint_contents: narrowed below
    info = np.iinfo(dtype)
    bad = np.flatnonzero((wide < info.min) | (wide > info.max))
    if bad.size:
        raise RequestError(
            f"Input {name!r} is {datatype}, but element {int(bad[0])} of contents.{field} is {int(wide[bad[0]])}, "
            f"outside {info.min} to {info.max}."
        )
    return wide.astype(dtype).reshape(shape)


def _from_raw(spec: TensorSpec, shape: tuple[int, ...], data: bytes, *, keep_bytes: bool) -> np.ndarray[Any, Any]:
    name, datatype = spec.name, spec.datatype
    count = math.prod(shape)
    if datatype == "BYTES":
        return bytes_elements(name, shape, count, data, keep_bytes=keep_bytes, where="raw contents")
    dtype = DATATYPES[datatype]
    if len(data) != count * dtype.itemsize:
        raise RequestError(
            f"Input {name!r} has {len(data)} bytes in raw_input_contents, but shape {list(shape)} of {datatype} takes "
            f"{count} x {dtype.itemsize} = {count * dtype.itemsize} bytes."
        )
    if datatype == "BOOL":
        bad = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) > 1)
        if bad.size:
            raise RequestError(
                f"Input {name!r} is BOOL but byte {int(bad[0])} of its raw contents is {data[int(bad[0])]}; BOOL "
                "elements are one byte, 0 or 1."
            )
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def _object_array(elements: list[Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    array = np.empty(len(elements), dtype=object)
    array[:] = elements
    return array.reshape(shape)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
