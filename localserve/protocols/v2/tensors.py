"""The tensors of the Open Inference Protocol (KServe V2), for REST and gRPC alike: its datatypes and their numpy
dtypes, a model's inputs and outputs as V2 describes them, the outputs a request asks for, and the checks both
wires make of a tensor's shape (with the same words)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from localserve.errors import RequestError
from localserve.messages.arrays import STRING
from localserve.messages.error_text import short_repr

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


def count_error(name: str, shape: tuple[int, ...], count: int, got: str) -> str:
    """The message for data whose element count is not what the shape holds."""
    return f"Input {name!r} has shape {list(shape)}, which holds {count} elements, but its data has {got}."


def checked_shape(value: list[int], spec: TensorSpec) -> tuple[int, ...]:
    """``value`` (whole numbers) as input ``spec``'s shape: each dimension in range and matching the model's."""
    if not all(0 <= d <= MAX_DIM for d in value):
        raise RequestError(
            f"Input {spec.name!r} needs a 'shape' list of whole numbers from 0 to {MAX_DIM}; "
            f"got {short_repr(value, 80)}."
        )
    expected = spec.shape
    if expected is not None and (
        len(value) != len(expected) or any(e >= 0 and e != d for e, d in zip(expected, value, strict=True))
    ):
        raise RequestError(
            f"Input {spec.name!r} has shape {value}; the model expects {shape_text(expected)} (-1: any size)."
        )
    return tuple(value)


def expected_inputs(inputs: Sequence[TensorSpec]) -> str:
    """The inputs a model expects, for messages: ``'x' (FP32 [-1, 4])``."""
    return ", ".join(f"{s.name!r} ({s.datatype} {shape_text(s.shape)})" for s in inputs)


def shape_text(shape: tuple[int, ...] | None) -> str:
    """A shape for messages: ``[-1, 4]``, or ``of any shape``."""
    return "of any shape" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"
