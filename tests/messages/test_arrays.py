"""What user code returns made the array an input expects: cast to its dtype, fitted to its shape, and every
refusal naming the input, what it expects, and the element that was wrong (where it was).

The ONNX runtime's tests (tests/runtimes/test_onnx.py) drive the same function through a real model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from localserve.errors import RequestError
from localserve.messages.arrays import STRING, dtype_name, expectation, shape_text, to_array

F32 = np.dtype(np.float32)
I64 = np.dtype(np.int64)


def test_names_of_dtypes_and_shapes() -> None:
    assert dtype_name(None) == "unsupported"
    assert dtype_name(STRING) == "string"
    assert dtype_name(np.dtype(np.uint8)) == "uint8"
    assert shape_text([None, 4, -1]) == "[-1, 4, -1]"
    assert expectation(F32, None) == "float32 of any shape"
    assert expectation(I64, [None, 2]) == "int64 of shape [-1, 2]"


def test_a_flat_list_is_fitted_to_a_shape_with_one_free_dimension() -> None:
    array = to_array("x", [1, 2, 3, 4, 5, 6, 7, 8], F32, [None, 4])
    assert array.dtype == F32 and array.shape == (2, 4)
    assert to_array("x", np.arange(6, dtype=np.float32), F32, [2, 3]).shape == (2, 3)


def test_a_shape_that_cannot_be_fitted_is_refused_with_what_came() -> None:
    with pytest.raises(RequestError) as caught:
        to_array("x", [1.0, 2.0, 3.0], F32, [None, 4])
    assert str(caught.value) == "Input 'x' expects float32 of shape [-1, 4]; got a list of 3 numbers."


def test_two_free_dimensions_are_left_to_the_runtime_only_when_asked() -> None:
    value = [[1.0, 2.0, 3.0]]
    assert to_array("x", value, F32, [None, None, 3], check_shape=False).shape == (1, 3)
    with pytest.raises(RequestError, match=r"expects float32 of shape \[-1, -1, 3\]; got a nested list of shape"):
        to_array("x", value, F32, [None, None, 3])


@pytest.mark.parametrize(
    ("value", "dtype", "message"),
    [
        ([1, "2"], F32, "Input 'x' expects float32 of any shape; the value '2' at [1] is a string, not a number."),
        ([1.0, True], F32, "Input 'x' expects float32 of any shape; the value True at [1] is a boolean, not a number."),
        (
            [[1.0], [1e39]],
            F32,
            "Input 'x' expects float32 of any shape; the value 1e+39 at [1, 0] is out of range for float32.",
        ),
        ([1, 2.5], I64, "Input 'x' expects int64 of any shape; the value 2.5 at [1] is not a whole number."),
        (
            [0, 300],
            np.dtype(np.uint8),
            "Input 'x' expects uint8 of any shape; the value 300 at [1] is out of range for uint8.",
        ),
        (
            [0, 2],
            np.dtype(np.bool_),
            "Input 'x' expects bool of any shape; the value 2 at [1] is not a boolean (true/false or 0/1).",
        ),
        (
            [[1, 2], [3]],
            F32,
            "Input 'x' expects float32 of any shape; got a nested list whose rows have different lengths (a nested list of shape [2]).",
        ),
    ],
)
def test_a_wrong_element_is_named_with_its_place(value: Any, dtype: np.dtype[Any], message: str) -> None:
    with pytest.raises(RequestError) as caught:
        to_array("x", value, dtype, None)
    assert str(caught.value) == message


def test_integers_past_2_to_the_53_keep_every_digit() -> None:
    big = 2**53 + 1
    assert to_array("ids", [big, 0.0], I64, None).tolist() == [big, 0]


def test_strings_are_str_and_bytes_are_decoded_unless_kept() -> None:
    assert to_array("t", ["a", b"caf\xc3\xa9"], STRING, None).tolist() == ["a", "caf\u00e9"]
    assert to_array("t", [b"\xff"], STRING, None, keep_bytes=True).tolist() == [b"\xff"]
    with pytest.raises(RequestError) as caught:
        to_array("t", [b"ok", b"\xff"], STRING, None)
    assert str(caught.value) == "Input 't' expects string of any shape; the value b'\\xff' at [1] is not valid UTF-8."
    with pytest.raises(RequestError, match=r"holds '\\ud800' at 1, a lone surrogate"):
        to_array("t", ["a\ud800"], STRING, None)


def test_described_words_the_first_part_of_the_message() -> None:
    with pytest.raises(RequestError) as caught:
        to_array("x", ["no"], F32, [1], described=lambda: "Input 'x' is FP32 of shape [1]")
    assert str(caught.value) == "Input 'x' is FP32 of shape [1]; the value 'no' at [0] is a string, not a number."
