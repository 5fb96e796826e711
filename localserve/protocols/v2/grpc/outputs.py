"""Outputs of the Open Inference Protocol over gRPC from numpy: a ModelInferResponse, raw or typed.

The answer is raw (``raw_output_contents``, little-endian, BYTES length-prefixed) when the request
was, as Triton answers ``tritonclient`` (which reads no typed field but ``bytes_contents``), or when
an output has no typed field (FP16); else typed, as the request was (MLServer's rule), which
KServe's client and grpcurl read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from localserve.errors import RequestError
from localserve.protocols.v2.grpc import inference_pb2 as pb
from localserve.protocols.v2.grpc.tensors import CONTENTS, LENGTH
from localserve.protocols.v2.tensors import DATATYPES, datatype_of
from localserve.protocols.v2.view import VERSION


def encode_response(
    model_name: str, request_id: str, outputs: Sequence[tuple[str, Any]], *, raw: bool, version: str = VERSION
) -> pb.ModelInferResponse:
    """The ModelInferResponse of ``outputs`` (name, value): raw contents when ``raw`` or when an output has no
    typed field (FP16), else typed contents."""
    arrays: list[tuple[str, np.ndarray[Any, Any], str]] = []
    for name, value in outputs:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        datatype = datatype_of(array.dtype)
        if datatype is None:
            raise RequestError(
                f"Output {name!r} is a {array.dtype} array, which the Open Inference Protocol has no datatype for."
            )
        arrays.append((name, array, datatype))
    raw = raw or any(datatype not in CONTENTS for _, _, datatype in arrays)
    response = pb.ModelInferResponse(model_name=model_name, model_version=version, id=request_id)
    for name, array, datatype in arrays:
        tensor = response.outputs.add(name=name, datatype=datatype, shape=array.shape)
        if raw:
            response.raw_output_contents.append(_raw_of(array, datatype))
        elif datatype == "BYTES":
            tensor.contents.bytes_contents.extend(_bytes_of(item) for item in array.flat)
        else:
            getattr(tensor.contents, CONTENTS[datatype]).extend(array.reshape(-1).tolist())
    return response


def _raw_of(array: np.ndarray[Any, Any], datatype: str) -> bytes:
    if datatype != "BYTES":
        return np.ascontiguousarray(array, dtype=DATATYPES[datatype]).tobytes()
    parts: list[bytes] = []
    for item in array.flat:
        data = _bytes_of(item)
        parts.append(LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def _bytes_of(item: Any) -> bytes:
    return item.encode("utf-8") if isinstance(item, str) else bytes(item)
