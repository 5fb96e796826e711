"""gRPC inputs: every datatype, typed and raw, decodes to the array that was sent; mistakes in the contents refused."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as triton

from localserve.errors import RequestError
from localserve.protocols.v2.grpc import inference_pb2 as pb
from localserve.protocols.v2.grpc.tensors import CONTENTS, decode_request
from localserve.protocols.v2.tensors import TensorSpec

ARRAYS = {
    "BOOL": np.array([[True, False, True]]),
    "UINT8": np.array([[0, 7, 255]], dtype=np.uint8),
    "UINT16": np.array([[0, 7, 65535]], dtype=np.uint16),
    "UINT32": np.array([[0, 7, 2**32 - 1]], dtype=np.uint32),
    "UINT64": np.array([[0, 7, 2**64 - 1]], dtype=np.uint64),
    "INT8": np.array([[-128, 0, 127]], dtype=np.int8),
    "INT16": np.array([[-(2**15), 0, 2**15 - 1]], dtype=np.int16),
    "INT32": np.array([[-(2**31), 0, 2**31 - 1]], dtype=np.int32),
    "INT64": np.array([[-(2**63), 0, 2**63 - 1]], dtype=np.int64),
    "FP16": np.array([[0.5, -1.25, 65504.0]], dtype=np.float16),
    "FP32": np.array([[0.1, -2.5, 3e38]], dtype=np.float32),
    "FP64": np.array([[0.1, -2.5, 1e308]], dtype=np.float64),
    "BYTES": np.array([["a", "", "été"]], dtype=object),
}


def spec(datatype: str) -> tuple[TensorSpec, ...]:
    return (TensorSpec("x", datatype, (-1, 3)),)


def raw_request(datatype: str, array: np.ndarray) -> pb.ModelInferRequest:
    """What tritonclient.grpc sends (raw contents), read with our messages."""
    given = triton.InferInput("x", list(array.shape), datatype)
    given.set_data_from_numpy(array)
    request = pb.ModelInferRequest(model_name="m")
    request.inputs.add().CopyFrom(
        pb.ModelInferRequest.InferInputTensor.FromString(given._get_tensor().SerializeToString())
    )
    request.raw_input_contents.append(given._get_content())
    return request


@pytest.mark.parametrize("datatype", list(ARRAYS))
def test_raw_and_typed_contents_decode_to_the_array_sent(datatype: str) -> None:
    array = ARRAYS[datatype]
    decoded = decode_request(raw_request(datatype, array), spec(datatype), spec(datatype))
    assert decoded.raw and decoded.outputs == ["x"]
    np.testing.assert_array_equal(decoded.feed["x"], array)
    if datatype in CONTENTS:
        request = pb.ModelInferRequest(model_name="m")
        tensor = request.inputs.add(name="x", datatype=datatype, shape=array.shape)
        values = [v.encode() for v in array.flat] if datatype == "BYTES" else array.ravel().tolist()
        getattr(tensor.contents, CONTENTS[datatype]).extend(values)
        decoded = decode_request(request, spec(datatype), spec(datatype))
        assert not decoded.raw
        np.testing.assert_array_equal(decoded.feed["x"], array)
        assert decoded.feed["x"].dtype == array.dtype


def test_typed_integers_out_of_range_are_refused() -> None:
    request = pb.ModelInferRequest(model_name="m")
    request.inputs.add(name="x", datatype="INT8", shape=[1, 3]).contents.int_contents.extend([1, 200, 3])
    with pytest.raises(RequestError) as caught:
        decode_request(request, spec("INT8"), spec("INT8"))
    assert str(caught.value) == "Input 'x' is INT8, but element 1 of contents.int_contents is 200, outside -128 to 127."


def test_typed_contents_in_the_wrong_field_are_refused() -> None:
    request = pb.ModelInferRequest(model_name="m")
    request.inputs.add(name="x", datatype="INT64", shape=[1, 3]).contents.int_contents.extend([1, 2, 3])
    with pytest.raises(RequestError) as caught:
        decode_request(request, spec("INT64"), spec("INT64"))
    assert (
        str(caught.value)
        == "Input 'x' is INT64, whose values go in contents.int64_contents; got contents.int_contents."
    )


def test_mixing_typed_and_raw_contents_is_refused() -> None:
    request = raw_request("FP32", ARRAYS["FP32"])
    request.inputs[0].contents.fp32_contents.extend([1.0, 2.0, 3.0])
    with pytest.raises(RequestError) as caught:
        decode_request(request, spec("FP32"), spec("FP32"))
    assert str(caught.value) == (
        "Input 'x' has both 'contents' and an entry in raw_input_contents; when the request uses raw_input_contents, "
        "every input's values must come that way."
    )
