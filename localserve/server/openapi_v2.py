"""The Open Inference Protocol's routes in the OpenAPI document: the V2 schemas, the server's ``/v2`` and,
for every API that is a V2 model, its metadata, readiness, configuration, statistics and ``infer``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localserve.protocols.v2.tensors import MAX_DIM
from localserve.server.openapi import JSON, ApiDoc, error_responses, get_route
from localserve.server.openapi_tensors import element_schema, tensor_example, tensor_schema

_V2_DATATYPES = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "uint64": "UINT64",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "string": "BYTES",
}


def _v2_tensor(spec: dict[str, Any], *, concrete: bool = False) -> dict[str, Any]:
    """A V2 tensor's name, datatype and shape: free dimensions are -1 (1 with ``concrete``, for an example)."""
    free = 1 if concrete else -1
    shape = [d if isinstance(d, int) and d >= 0 else free for d in (spec.get("shape") or [])]
    return {"name": spec["name"], "datatype": _V2_DATATYPES.get(spec["type"], spec["type"].upper()), "shape": shape}


def add_v2_paths(document: dict[str, Any], apis: Sequence[ApiDoc]) -> None:
    """Add the Open Inference Protocol's routes for the ``apis`` that are V2 models (a model run by localserve).

    Without one, the server's ``/v2`` metadata joins the health routes, and there is no ``v2`` section and
    no V2 schema.
    """
    paths = document["paths"]
    any_json = {JSON: {"schema": {"type": "object"}}}
    listing = {JSON: {"schema": {"type": "array", "items": {"type": "object"}}}}
    index = "Every V2 model and version, with its state (a multi-model API's models as <api>.<model>)"
    models = [api for api in apis if api.model_format is not None and api.kind == "request_handler"]
    tag = "v2" if models else "health"
    paths["/v2/models"] = get_route(index, tag, "v2_models", listing)
    paths["/v2/repository/index"] = {"post": {**get_route(index, tag, "v2_repository_index", listing)["get"]}}
    paths["/v2"] = get_route("Server metadata (Open Inference Protocol)", tag, "v2_server", {JSON: {"schema": {}}})
    if models:
        document["components"]["schemas"].update(_v2_schemas())
        document["tags"].append({"name": "v2", "description": "The Open Inference Protocol (KServe V2)"})
        paths["/v2/models/stats"] = get_route(
            "Statistics of every model (Triton's extension)", "v2", "v2_stats", any_json, 404
        )
    for api in models:
        paths.update(_v2_model_paths(api, any_json))
    document["paths"] = dict(sorted(paths.items()))


def _v2_schemas() -> dict[str, Any]:
    """The V2 schemas every model's routes share: a tensor (any model's) and the inference response."""
    tensor = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            "datatype": {"enum": sorted(set(_V2_DATATYPES.values()))},
            "parameters": {"type": "object"},
            "data": {"type": "array"},
        },
        "required": ["name", "shape", "datatype"],
    }
    return {
        "V2Tensor": tensor,
        "V2InferResponse": {
            "type": "object",
            "properties": {
                "model_name": {"type": "string"},
                "model_version": {"type": "string"},
                "id": {"type": "string"},
                "parameters": {"type": "object"},
                "outputs": {"type": "array", "items": {"$ref": "#/components/schemas/V2Tensor"}},
            },
            "required": ["model_name", "outputs"],
        },
    }


def _data_schema(dtype: str, shape: Sequence[Any] | None) -> dict[str, Any]:
    """A V2 input's 'data': its elements, flat or nested in the input's shape. JSON Schema cannot tie the number
    of elements to the request's 'shape' (their product), which the server checks (400)."""
    element = {"type": "string"} if dtype == "string" else element_schema(dtype)
    flat = {"type": "array", "items": element}
    if not shape or len(shape) == 1:
        return flat
    nested = tensor_schema(dtype, shape)
    nested.pop("description", None)
    return {"anyOf": [flat, nested]}


def _input_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """One of the model's inputs in an inference request: its name, datatype and shape as the model has them."""
    v2 = _v2_tensor(spec)
    dims = [{"const": d} if d >= 0 else {"type": "integer", "minimum": 0, "maximum": MAX_DIM} for d in v2["shape"]]
    shape: dict[str, Any] = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": MAX_DIM}}
    if spec.get("shape") is not None:
        shape = {"type": "array", "prefixItems": dims, "minItems": len(dims), "maxItems": len(dims)}
    return {
        "type": "object",
        "properties": {
            "name": {"const": v2["name"]},
            "datatype": {"const": v2["datatype"]},
            "shape": shape,
            "parameters": {"type": "object", "not": {"required": ["binary_data_size"]}},
            "data": _data_schema(spec["type"], spec.get("shape")),
        },
        "required": ["name", "shape", "datatype", "data"],
    }


def _infer_request_schema(api: ApiDoc) -> dict[str, Any]:
    """An inference request of ``api`` in JSON: each of the model's inputs once, outputs named at most once."""
    names = [i["name"] for i in api.inputs]
    outputs = [o["name"] for o in api.outputs if o.get("type") in _V2_DATATYPES]
    flag = {"type": "object", "properties": {"binary_data_output": {"type": "boolean"}}}
    requested = {
        "type": "object",
        "properties": {
            "name": {"enum": outputs},
            "parameters": {
                "type": "object",
                "properties": {"binary_data": {"type": "boolean"}},
                "not": {"required": ["classification"]},
            },
        },
        "required": ["name"],
    }
    inputs: dict[str, Any] = {
        "type": "array",
        "items": {"oneOf": [_input_schema(i) for i in api.inputs]},
        "minItems": len(names),
        "maxItems": len(names),
        "allOf": [{"contains": {"properties": {"name": {"const": n}}}} for n in names],
    }
    return {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "parameters": flag,
            "inputs": inputs,
            "outputs": {"type": "array", "items": requested, "maxItems": len(outputs), "uniqueItems": True},
        },
        "required": ["inputs"],
    }


def _v2_model_paths(api: ApiDoc, any_json: dict[str, Any]) -> dict[str, Any]:
    """The routes of one V2 model: ready, config, stats, its metadata and infer."""
    paths: dict[str, Any] = {}
    for tail, summary, operation in (
        ("ready", f"{api.name!r} is loaded", "v2_ready"),
        ("config", f"Triton's model configuration of {api.name!r}", "v2_config"),
        ("stats", f"Statistics of {api.name!r} (Triton's extension)", "v2_stats"),
    ):
        paths[f"/v2/models/{api.name}/{tail}"] = get_route(summary, "v2", f"{operation}_{api.name}", any_json, 404, 503)
    example = {
        "inputs": [{**_v2_tensor(i, concrete=True), "data": tensor_example(i["type"], i["shape"])} for i in api.inputs],
    }
    paths[f"/v2/models/{api.name}"] = get_route(
        f"Metadata of {api.name!r}: inputs and outputs with datatypes and shapes",
        "v2",
        f"v2_metadata_{api.name}",
        {JSON: {"schema": {}, "example": {"name": api.name, "inputs": [_v2_tensor(i) for i in api.inputs]}}},
        404,
    )
    paths[f"/v2/models/{api.name}/infer"] = {
        "post": {
            "summary": f"Run {api.name!r} on tensors (Open Inference Protocol)",
            "operationId": f"v2_infer_{api.name}",
            "tags": ["v2"],
            "requestBody": {
                "required": True,
                "content": {JSON: {"schema": _infer_request_schema(api), "example": example}},
            },
            "responses": {
                "200": {
                    "description": "The outputs; with binary outputs asked for, the JSON header (its length in "
                    "Inference-Header-Content-Length) and then their bytes.",
                    "content": {
                        JSON: {"schema": {"$ref": "#/components/schemas/V2InferResponse"}},
                        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                    },
                },
                **error_responses(400, 404, 503),
            },
        }
    }
    return paths
