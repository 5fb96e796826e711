"""The Open Inference Protocol's paths in /openapi.json: one call away, for the APIs whose model localserve runs.

The document served by the real app is checked in tests/server/test_pages.py."""

from __future__ import annotations

from openapi_spec_validator import validate

from localserve.server.openapi import ApiDoc, openapi_document
from localserve.server.openapi_v2 import add_v2_paths


def test_v2_paths_are_one_call_away_and_only_for_models() -> None:
    inputs = [{"name": "x", "type": "float32", "shape": ["batch", 4]}]
    apis = [
        ApiDoc(name="iris", kind="request_handler", model_format="onnx", inputs=inputs, raw_model=True),
        ApiDoc(name="echo", kind="abeja"),
    ]
    document = openapi_document(apis)
    add_v2_paths(document, apis)
    validate(document)
    assert {p for p in document["paths"] if p.startswith("/v2")} == {
        "/v2",
        "/v2/health/live",
        "/v2/health/ready",
        "/v2/models",
        "/v2/repository/index",
        "/v2/models/stats",
        *(f"/v2/models/iris{tail}" for tail in ("", "/infer", "/ready", "/config", "/stats")),
    }
    infer = document["paths"]["/v2/models/iris/infer"]["post"]["requestBody"]["content"]["application/json"]
    assert infer["example"] == {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [[1, 1, 1, 1]]}]}
