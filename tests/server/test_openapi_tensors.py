"""JSON Schemas and examples of model tensors in /openapi.json: each dtype's bounds (a conforming request never
overflows the model's dtype), nested arrays of the shape, and an example of ones that the schema accepts."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from localserve.server.openapi_tensors import (
    element_schema,
    fits_inputs,
    model_example,
    model_request_schema,
    tensor_example,
    tensor_schema,
)


@pytest.mark.parametrize(
    ("dtype", "schema"),
    [
        ("bool", {"type": "boolean"}),
        ("string", {"type": "string"}),
        ("int8", {"type": "integer", "minimum": -128, "maximum": 127}),
        ("uint16", {"type": "integer", "minimum": 0, "maximum": 65535}),
        ("float16", {"type": "number", "exclusiveMinimum": -65520.0, "exclusiveMaximum": 65520.0}),
        ("float64", {"type": "number"}),
        ("bfloat16", {"type": "number"}),
        ("complex64", {}),
    ],
)
def test_each_dtypes_element(dtype: str, schema: dict[str, Any]) -> None:
    assert element_schema(dtype) == schema


def test_a_tensor_is_nested_arrays_of_its_shape() -> None:
    schema = tensor_schema("float32", ["batch", 4])
    assert schema["description"] == "float32 of shape [-1, 4]"
    jsonschema.validate([[1, 2, 3, 4], [5, 6, 7, 8]], schema)
    for wrong in ([[1, 2, 3]], [1, 2, 3, 4], [[1, 2, 3, "4"]], [[1e39, 0, 0, 0]]):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)
    free = tensor_schema("int64", None)
    jsonschema.validate(3, free)
    jsonschema.validate([[1]], free)


def test_the_example_is_ones_and_fits_its_schema() -> None:
    assert tensor_example("float32", [None, 2, 3]) == [[[1, 1, 1], [1, 1, 1]]]
    assert tensor_example("string", [2]) == ["a", "a"]
    assert tensor_example("bool", None) == [True]
    inputs = [{"name": "x", "type": "float32", "shape": [-1, 4]}, {"name": "ids", "type": "int64", "shape": [-1]}]
    example = model_example(inputs)
    assert example == {"x": [[1, 1, 1, 1]], "ids": [1]}
    jsonschema.validate(example, model_request_schema(inputs))


def test_one_input_may_be_sent_by_name_or_alone() -> None:
    one = [{"name": "x", "type": "float32", "shape": [-1, 2]}]
    schema = model_request_schema(one)
    jsonschema.validate({"x": [[1, 2]]}, schema)
    jsonschema.validate([[1, 2]], schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"x": [[1, 2]], "y": 1}, schema)
    assert fits_inputs({"x": 1}, one) and fits_inputs([1], one)
    assert not fits_inputs({"y": 1}, one) and not fits_inputs([1], one + one)
