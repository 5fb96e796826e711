"""gRPC outputs: every datatype encoded raw or typed, and read back as the unmodified tritonclient reads it (raw) or as
KServe's client and grpcurl read it (typed)."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2

from localserve.protocols.v2.grpc.outputs import encode_response
from localserve.protocols.v2.grpc.tensors import CONTENTS
from tests.protocols.v2.grpc.test_tensors import ARRAYS


@pytest.mark.parametrize("datatype", list(ARRAYS))
@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed"])
def test_outputs_read_back_with_tritonclient(datatype: str, raw: bool) -> None:
    array = ARRAYS[datatype]
    response = encode_response("m", "id-1", [("y", array)], raw=raw)
    assert bool(response.raw_output_contents) == (raw or datatype == "FP16")  # FP16 has no typed field
    read = service_pb2.ModelInferResponse.FromString(response.SerializeToString())
    assert (read.id, read.model_version, read.outputs[0].datatype, list(read.outputs[0].shape)) == (
        "id-1",
        "1",
        datatype,
        [1, 3],
    )
    expected = np.array([[v.encode() for v in array.flat]], dtype=object) if datatype == "BYTES" else array
    if response.raw_output_contents:  # what tritonclient reads (it reads no typed field but bytes_contents)
        np.testing.assert_array_equal(triton.InferResult(read).as_numpy("y"), expected)
    else:  # typed: what KServe's client and grpcurl read
        values = getattr(read.outputs[0].contents, CONTENTS[datatype])
        np.testing.assert_array_equal(np.array(values, dtype=expected.dtype).reshape(1, 3), expected)
