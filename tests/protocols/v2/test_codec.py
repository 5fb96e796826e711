"""The V2 codec: bodies built by the unmodified tritonclient decode to the arrays it was given; bad bodies are 400s."""

from __future__ import annotations

import json
import struct
import tracemalloc
from typing import Any

import numpy as np
import pytest
import tritonclient.http as triton

from localserve.errors import RequestError
from localserve.protocols.v2.codec import decode_request, encode_response
from localserve.protocols.v2.tensors import Requested, TensorSpec

X = TensorSpec("x", "FP32", (-1, 4))
Y = TensorSpec("y", "FP32", (-1, 4))


def triton_body(arrays: dict[str, tuple[str, np.ndarray]], binary: bool, **kwargs: Any) -> tuple[bytes, int | None]:
    """The body tritonclient sends for ``arrays`` (name -> (datatype, array)), and its JSON header length."""
    inputs = []
    for name, (datatype, array) in arrays.items():
        item = triton.InferInput(name, list(array.shape), datatype)
        item.set_data_from_numpy(array, binary_data=binary)
        inputs.append(item)
    body, json_size = triton.InferenceServerClient.generate_request_body(inputs, **kwargs)
    return bytes(body), json_size


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize(
    ("datatype", "array"),
    [
        ("FP32", np.array([[1.5, -2.25, 3.0, 4.0]], dtype=np.float32)),
        ("FP16", np.array([[0.5, 65504.0, -1.0, 2.0], [1, 2, 3, 4]], dtype=np.float16)),
        ("FP64", np.array([[1e300, 2.0, 3.0, 4.0]])),
        ("INT64", np.array([[2**62, -(2**62), 0, 1]], dtype=np.int64)),
        ("UINT8", np.array([[0, 255, 7, 8]], dtype=np.uint8)),
        ("INT8", np.array([[-128, 127, 0, 1]], dtype=np.int8)),
        ("BOOL", np.array([[True, False, True, True]])),
    ],
)
def test_tritonclient_bodies_decode_to_the_same_arrays(datatype: str, array: np.ndarray, binary: bool) -> None:
    body, length = triton_body({"x": (datatype, array)}, binary)
    decoded = decode_request(body, length, [TensorSpec("x", datatype, (-1, 4))], [Y])
    got = decoded.feed["x"]
    assert got.dtype == array.dtype
    np.testing.assert_array_equal(got, array)
    # with no outputs named, tritonclient asks for every output as binary data
    assert json.loads(body[:length])["parameters"] == {"binary_data_output": True}
    assert decoded.outputs == [Requested("y", True)]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_bytes_tensors_round_trip_as_text_or_bytes(binary: bool) -> None:
    array = np.array([["héllo", ""], ["a\x00b", "z" * 300]], dtype=object)
    body, length = triton_body({"s": ("BYTES", array)}, binary)
    spec = TensorSpec("s", "BYTES", (-1, 2))
    as_text = decode_request(body, length, [spec], []).feed["s"]
    assert as_text.tolist() == array.tolist()
    if binary:  # TensorFlow keeps the bytes
        as_bytes = decode_request(body, length, [spec], [], keep_bytes=True).feed["s"]
        assert as_bytes.tolist() == [[s.encode() for s in row] for row in array.tolist()]


def test_binary_and_json_inputs_mix_and_the_id_and_outputs_come_through() -> None:
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.array([[1, 2]], dtype=np.int32)
    first = triton.InferInput("a", [2, 4], "FP32")
    first.set_data_from_numpy(a, binary_data=True)
    second = triton.InferInput("b", [1, 2], "INT32")
    second.set_data_from_numpy(b, binary_data=False)
    wanted = [triton.InferRequestedOutput("y", binary_data=True), triton.InferRequestedOutput("z", binary_data=False)]
    body, length = triton.InferenceServerClient.generate_request_body([first, second], wanted, request_id="r-7")
    specs = [TensorSpec("a", "FP32", (-1, 4)), TensorSpec("b", "INT32", (1, 2))]
    outs = [TensorSpec("y", "FP32", (-1,)), TensorSpec("z", "INT64", (-1,)), TensorSpec("w", "FP32", (-1,))]
    decoded = decode_request(bytes(body), length, specs, outs)
    np.testing.assert_array_equal(decoded.feed["a"], a)
    np.testing.assert_array_equal(decoded.feed["b"], b)
    assert decoded.id == "r-7"
    assert decoded.outputs == [Requested("y", True), Requested("z", False)]


def test_nested_json_data_is_row_major_and_binary_data_output_sets_the_default() -> None:
    header = {
        "inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [[1, 2, 3, 4], [5, 6, 7, 8]]}],
        "parameters": {"binary_data_output": True},
    }
    decoded = decode_request(json.dumps(header).encode(), None, [X], [Y])
    np.testing.assert_array_equal(decoded.feed["x"], np.arange(1, 9, dtype=np.float32).reshape(2, 4))
    assert decoded.outputs == [Requested("y", True)]


def json_input(**fields: Any) -> bytes:
    tensor = {"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4], **fields}
    return json.dumps({"inputs": [tensor]}).encode()


def binary_input(shape: list[int], size: int, payload: bytes, datatype: str = "FP32") -> tuple[bytes, int]:
    header = json.dumps(
        {"inputs": [{"name": "x", "shape": shape, "datatype": datatype, "parameters": {"binary_data_size": size}}]}
    ).encode()
    return header + payload, len(header)


def error_of(body: bytes, length: int | None = None, inputs: list[TensorSpec] | None = None) -> str:
    with pytest.raises(RequestError) as caught:
        decode_request(body, length, inputs or [X], [Y])
    assert caught.value.status_code == 400
    return str(caught.value)


def test_a_header_that_is_not_json_says_why_in_the_native_routes_words() -> None:
    assert error_of(b'{"inputs": \xff}') == (
        "The request's JSON header is not valid JSON: it is not UTF-8 (invalid start byte at byte 11). A body "
        "with binary tensor data gives the length of its JSON header in the Inference-Header-Content-Length header."
    )
    body, _ = binary_input([1, 4], 16, b"\xff" * 16)
    assert error_of(body).endswith("gives the length of its JSON header in the Inference-Header-Content-Length header.")
    assert error_of(b'{"inputs": \xff}', 11) == "The request's JSON header (the first 11 bytes) is not valid JSON: " + (
        "Expecting value at line 1 column 12 (char 11)."
    )
    assert error_of(json_input(data=[1, 2, 3, 1e999]).replace(b"Infinity", b"1e400")) == (
        "The request's JSON header is not valid JSON: the number 1e400 is beyond the range of a double (about "
        "\u00b11.8e308); send infinities as binary tensor data."
    )


@pytest.mark.parametrize("where", ["id", "data"])
def test_half_a_surrogate_pair_is_a_400_not_a_500_later(where: str) -> None:
    """The standard library reads "\\ud800", which orjson refuses: no answer (its id) and no tensor can carry it."""
    spec = TensorSpec("s", "BYTES", (-1,))
    document = {"id": "\ud800"} if where == "id" else {}
    document["inputs"] = [
        {"name": "s", "shape": [1], "datatype": "BYTES", "data": ["\ud800" if where == "data" else "a"]}
    ]
    assert error_of(json.dumps(document).encode(), inputs=[spec]) == (
        "The request's JSON header is not valid JSON for this protocol: no low surrogate in string (a \\u escape of "
        "half a surrogate pair, which is no character)."
    )


def test_nan_and_infinity_are_refused_by_name_as_triton_refuses_them() -> None:
    for constant in ("NaN", "Infinity", "-Infinity"):
        body = json_input(data=[1, 2, 3, 0]).replace(b"3, 0", b"3, " + constant.encode())
        assert error_of(body) == (
            f"The request's JSON header is not valid JSON: {constant} is not a JSON number, and the Open Inference "
            "Protocol's JSON has no NaN or Infinity (as Triton's); send such values as binary tensor data."
        )


def test_an_integer_past_64_bits_is_named_as_read_out_of_range() -> None:
    """orjson reads an integer past 64 bits as a float: the message names that float, not an int made of it."""
    spec = TensorSpec("i", "INT64", (-1,))
    body = json.dumps({"inputs": [{"name": "i", "shape": [2], "datatype": "INT64", "data": [1, 10**23]}]}).encode()
    assert error_of(body, inputs=[spec]) == (
        "Input 'i' is INT64 of shape [2]; the value 1e+23 at [1] is out of range for int64."
    )


def test_values_of_any_depth_are_named_without_failing() -> None:
    deep = b'{"a": ' * 1000 + b"1" + b"}" * 1000  # deeper than repr() can go, within orjson's 1,024 levels
    assert error_of(json_input(data=[0, 2, 3, 4]).replace(b"[0,", b"[" + deep + b",")) == (
        "Input 'x' is FP32 of shape [1, 4]; the value {'a': {'a': {'a': {...}}}} at [0] could not be converted to "
        "float32."
    )
    nested: object = [1, 2, 3, None]  # checked element by element (numpy's .flat), which stops at 32 dimensions
    for _ in range(32):
        nested = [nested]
    assert error_of(json_input(data=nested)) == (
        "Input 'x' is FP32 of shape [1, 4]; got a list nested 33 levels deep, past the 32 an input may have."
    )


def test_bad_requests_say_what_was_wrong_and_what_was_expected() -> None:
    assert error_of(json_input(name="z")) == "Unknown input 'z'; the model expects 'x' (FP32 [-1, 4])."
    assert error_of(json_input(datatype="FP64")) == "Input 'x' has datatype 'FP64'; the model expects FP32 for it."
    missing = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "data": [1, 2, 3, 4]}]}).encode()
    assert error_of(missing) == "Input 'x' has no 'datatype'; the model expects FP32 for it."
    assert error_of(json_input(shape=[1, 5])) == "Input 'x' has shape [1, 5]; the model expects [-1, 4] (-1: any size)."
    assert error_of(json_input(shape=[2, 4])) == (
        "Input 'x' has shape [2, 4], which holds 8 elements, but its data has 4 elements."
    )
    assert error_of(json_input(data=[1, 2, "3", 4])) == (
        "Input 'x' is FP32; the value '3' at [2] of its data is a string, not a number."
    )
    assert error_of(b'{"inputs": []}') == "Input 'x' is missing; the model expects 'x' (FP32 [-1, 4])."
    assert error_of(json_input(shape=[1, -4])) == (
        "Input 'x' needs a 'shape' list of whole numbers from 0 to 9223372036854775807; got [1, -4]."
    )
    assert error_of(json_input(data=[[1, 2], [3, 4, 5]], shape=[1, 4])).startswith(
        "Input 'x' is FP32 of shape [1, 4]; got a nested list whose rows have different lengths"
    )
    assert error_of(json_input(data=[1, 2, 3, True])) == (
        "Input 'x' is FP32 of shape [1, 4]; the value True at [3] is a boolean, not a number."
    )
    assert error_of(b"[1]") == "The request must be a JSON object with 'inputs'; got a list."
    assert error_of(b"{not json").startswith("The request's JSON header is not valid JSON: ")
    body, length = binary_input([1, 4], 12, b"\0" * 12)
    assert error_of(body, length) == (
        "Input 'x' has binary_data_size 12, but shape [1, 4] of FP32 takes 4 x 4 = 16 bytes."
    )
    body, length = binary_input([1, 4], 16, b"\0" * 8)
    assert error_of(body, length) == (
        "Input 'x' has binary_data_size 16, past the end of the body: 8 bytes of binary data are left after the "
        "JSON header and the inputs before it."
    )
    body, length = binary_input([1, 4], 16, b"\0" * 20)
    assert error_of(body, length) == (
        "The body has 20 bytes after the JSON header but the inputs' binary_data_size add up to 16; they must be equal."
    )
    header = json_input(parameters={"binary_data_size": 16})
    assert error_of(header + b"\0" * 16, len(header)) == (
        "Input 'x' has both 'data' and a binary_data_size parameter; its values must come one way: in 'data', or "
        "in the binary part after the JSON header."
    )
    body, length = binary_input([1, 4], 4, b"\x00\x02\x01\x00", datatype="BOOL")
    spec = TensorSpec("x", "BOOL", (-1, 4))
    assert error_of(body, length, [spec]) == (
        "Input 'x' is BOOL but byte 1 of its binary data is 2; BOOL elements are one byte, 0 or 1."
    )


def test_bytes_elements_must_fit_their_lengths() -> None:
    spec = TensorSpec("x", "BYTES", (-1,))
    body, length = binary_input([1], 7, struct.pack("<I", 5) + b"abc", "BYTES")
    assert error_of(body, length, [spec]) == (
        "Element 0 of input 'x' (BYTES) says 5 bytes but only 3 are left in its binary data."
    )
    body, length = binary_input([1], 6, struct.pack("<I", 1) + b"a" + b"\x01", "BYTES")
    assert error_of(body, length, [spec]) == (
        "Input 'x' (BYTES) ends with 1 stray bytes; each element is a 4-byte little-endian length then that many bytes."
    )
    body, length = binary_input([1], 6, struct.pack("<I", 2) + b"\xff\xfe", "BYTES")
    assert error_of(body, length, [spec]) == (
        "Element 0 of input 'x' (BYTES) is not valid UTF-8; this model's string inputs take text."
    )


@pytest.mark.parametrize(
    ("shape", "size", "datatype", "message"),
    [
        (
            [2**62, 2**62],
            16,
            "FP32",
            "Input 'x' has binary_data_size 16, but shape [4611686018427387904, 4611686018427387904] of FP32 takes "
            "21267647932558653966460912964485513216 x 4 = 85070591730234615865843651857942052864 bytes.",
        ),
        (
            [2**40, 2**40],
            16,
            "BYTES",
            "Input 'x' has shape [1099511627776, 1099511627776], which holds 1208925819614629174706176 elements, but "
            "its binary data has 16 bytes, room for at most 4.",
        ),
        (
            [2**63, 1],
            16,
            "FP32",
            "Input 'x' needs a 'shape' list of whole numbers from 0 to 9223372036854775807; got "
            "[9223372036854775808, 1].",
        ),
    ],
)
def test_hostile_shapes_are_refused_without_allocating(
    shape: list[int], size: int, datatype: str, message: str
) -> None:
    spec = TensorSpec("x", datatype, (-1, -1))
    body, length = binary_input(shape, size, b"\0" * size, datatype)
    tracemalloc.start()
    try:
        with pytest.raises(RequestError) as caught:
            decode_request(body, length, [spec], [])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(caught.value) == message
    assert peak < 64 * 1024, f"decoding a hostile shape allocated {peak} bytes"


def test_a_json_shape_whose_product_overflows_is_a_count_error() -> None:
    body = json_input(shape=[2**62, 4])
    assert error_of(body) == (
        "Input 'x' has shape [4611686018427387904, 4], which holds 18446744073709551616 elements, but its data has "
        "4 elements."
    )


def test_requested_outputs_must_exist() -> None:
    body = json.dumps(
        {
            "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
            "outputs": [{"name": "q"}],
        }
    ).encode()
    assert error_of(body) == "Unknown output 'q'; the model's outputs are 'y'."


def test_an_output_requested_twice_is_refused() -> None:
    """100 copies of one output in a 1.6 MB request answered 114.5 MB."""
    body = json.dumps(
        {
            "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
            "outputs": [{"name": "y"}, {"name": "y", "parameters": {"binary_data": True}}],
        }
    ).encode()
    assert error_of(body) == "Output 'y' is requested twice; name each output once."


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_tritonclient_reads_the_responses(binary: bool) -> None:
    outputs = {
        "f16": np.array([[0.5, -2.0]], dtype=np.float16),
        "f32": np.array([[1.25, 3.5, -0.0]], dtype=np.float32),
        "i64": np.array([7, -9], dtype=np.int64),
        "b": np.array([True, False]),
        "s": np.array(["héllo", "x"], dtype=object),
    }
    body, length = encode_response("m", "id-1", [(Requested(n, binary), v) for n, v in outputs.items()])
    assert (length is not None) == binary
    result = triton.InferenceServerClient.parse_response_body(body, header_length=length)
    response = result.get_response()
    assert response["model_name"] == "m" and response["id"] == "id-1"
    for name, array in outputs.items():
        got = result.as_numpy(name)
        if name == "s":
            assert [v.decode() if isinstance(v, bytes) else v for v in got.tolist()] == array.tolist()
        else:
            assert got.dtype == array.dtype
            np.testing.assert_array_equal(got, array)
    entry = next(o for o in response["outputs"] if o["name"] == "f32")
    assert entry["datatype"] == "FP32" and entry["shape"] == [1, 3]
