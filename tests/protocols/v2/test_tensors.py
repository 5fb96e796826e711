"""The tensors of the Open Inference Protocol for REST and gRPC alike: datatypes and numpy dtypes, a tensor as
model metadata, and the checks of a shape both wires make, in the same words."""

from __future__ import annotations

import numpy as np
import pytest

from localserve.errors import RequestError
from localserve.protocols.v2.tensors import (
    TensorSpec,
    checked_shape,
    count_error,
    datatype_of,
    datatype_of_name,
    expected_inputs,
)


def test_datatypes_map_exactly() -> None:
    assert [datatype_of(np.dtype(t)) for t in ("float16", "float32", "float64", "bool", "uint64", "int8", "O")] == [
        "FP16",
        "FP32",
        "FP64",
        "BOOL",
        "UINT64",
        "INT8",
        "BYTES",
    ]
    assert datatype_of(np.dtype("complex64")) is None


def test_runtime_type_names_map_to_datatypes() -> None:
    assert [datatype_of_name(n) for n in ("float32", "int64", "bool", "string", "complex64")] == [
        "FP32",
        "INT64",
        "BOOL",
        "BYTES",
        None,
    ]


def test_a_tensor_as_model_metadata_lists_it() -> None:
    assert TensorSpec("x", "FP32", (-1, 4)).metadata() == {"name": "x", "datatype": "FP32", "shape": [-1, 4]}
    assert TensorSpec("y", "BYTES", None).metadata() == {"name": "y", "datatype": "BYTES", "shape": [-1]}


def test_a_shape_is_checked_against_the_models_with_the_same_words_on_both_wires() -> None:
    spec = TensorSpec("x", "FP32", (-1, 4))
    assert checked_shape([3, 4], spec) == (3, 4)
    assert checked_shape([1, 2, 3], TensorSpec("x", "FP32", None)) == (1, 2, 3)  # rank unknown: any shape
    with pytest.raises(RequestError) as caught:
        checked_shape([3, 5], spec)
    assert str(caught.value) == "Input 'x' has shape [3, 5]; the model expects [-1, 4] (-1: any size)."
    with pytest.raises(RequestError) as caught:
        checked_shape([3], spec)
    assert str(caught.value) == "Input 'x' has shape [3]; the model expects [-1, 4] (-1: any size)."
    with pytest.raises(RequestError) as caught:
        checked_shape([-1, 4], spec)
    assert str(caught.value) == (
        "Input 'x' needs a 'shape' list of whole numbers from 0 to 9223372036854775807; got [-1, 4]."
    )


def test_the_words_of_messages() -> None:
    inputs = [TensorSpec("x", "FP32", (-1, 4)), TensorSpec("s", "BYTES", None)]
    assert expected_inputs(inputs) == "'x' (FP32 [-1, 4]), 's' (BYTES of any shape)"
    assert count_error("x", (2, 2), 4, "3 values") == (
        "Input 'x' has shape [2, 2], which holds 4 elements, but its data has 3 values."
    )
