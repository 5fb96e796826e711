"""The tensors of the Open Inference Protocol (KServe V2): its datatypes and their numpy dtypes, a model's
inputs and outputs as V2 describes them, and the outputs a request asks for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from localserve.messages.arrays import STRING

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
