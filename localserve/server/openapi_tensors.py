"""JSON Schemas and examples of model tensors for the OpenAPI document (``openapi``, ``openapi_v2``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# JSON Schema of one element of each dtype a model describes (``runtimes.*.describe``). Integer
# bounds keep a conforming request from overflowing the cast to the model's dtype.
_INTS = {
    "int8": 2**7,
    "int16": 2**15,
    "int32": 2**31,
    "int64": 2**63,
}
# The least magnitude each float dtype rounds to infinity (its largest value and half a step): below it a
# number is cast to the nearest float; from it on, refused.
_FLOAT_MAX = {"float16": 65520.0, "float32": 3.4028235677973366e38}
_UINTS = {"uint8": 2**8, "uint16": 2**16, "uint32": 2**32, "uint64": 2**64}


def element_schema(dtype: str) -> dict[str, Any]:
    """JSON Schema of one tensor element of ``dtype`` (a numpy dtype name, or "string")."""
    if dtype == "bool":
        return {"type": "boolean"}
    if dtype == "string":
        return {"type": "string"}
    if dtype in _INTS:
        return {"type": "integer", "minimum": -_INTS[dtype], "maximum": _INTS[dtype] - 1}
    if dtype in _UINTS:
        return {"type": "integer", "minimum": 0, "maximum": _UINTS[dtype] - 1}
    if dtype in _FLOAT_MAX:  # a larger number is refused: it does not fit the model's dtype
        return {"type": "number", "exclusiveMinimum": -_FLOAT_MAX[dtype], "exclusiveMaximum": _FLOAT_MAX[dtype]}
    if dtype.startswith(("float", "bfloat")):
        return {"type": "number"}
    return {}


def tensor_schema(dtype: str, shape: Sequence[Any] | None) -> dict[str, Any]:
    """Nested JSON arrays of ``shape`` (fixed sizes as min/max items); any shape when unknown."""
    element = element_schema(dtype)
    if shape is None:
        return {"description": f"a {dtype} tensor of any shape", "anyOf": [element, {"type": "array"}]}
    schema: dict[str, Any] = element
    for dim in reversed(list(shape)):
        schema = {"type": "array", "items": schema}
        if isinstance(dim, int) and dim >= 0:
            schema["minItems"] = schema["maxItems"] = dim
    shown = [d if isinstance(d, int) and d >= 0 else -1 for d in shape]
    schema["description"] = f"{dtype} of shape {shown}"
    return schema


def tensor_example(dtype: str, shape: Sequence[Any] | None) -> Any:
    """A tensor of ones of ``shape`` (an unknown dimension taken as 1)."""
    one: Any = "a" if dtype == "string" else True if dtype == "bool" else 1
    value = one
    for dim in reversed(list(shape or [1])):
        value = [value] * (dim if isinstance(dim, int) and dim >= 0 else 1)
    return value


def model_request_schema(inputs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The body of a raw-model API: a dict of input name -> tensor, or the tensor itself for one input."""
    properties = {i["name"]: tensor_schema(i["type"], i["shape"]) for i in inputs}
    by_name: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": [i["name"] for i in inputs],
        "additionalProperties": False,
    }
    if len(inputs) == 1:
        only = inputs[0]
        return {"anyOf": [by_name, tensor_schema(only["type"], only["shape"])]}
    return by_name


def model_example(inputs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """An example request for a raw model: a tensor of ones for each input."""
    return {i["name"]: tensor_example(i["type"], i["shape"]) for i in inputs}


def fits_inputs(value: Any, inputs: Sequence[dict[str, Any]]) -> bool:
    """Whether ``value`` names exactly the model's inputs (or is a list, for a single input)."""
    if isinstance(value, dict):
        return set(value) == {i["name"] for i in inputs}
    return isinstance(value, list) and len(inputs) == 1
