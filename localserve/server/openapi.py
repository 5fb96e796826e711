"""The OpenAPI 3.1 document of a replica: every route it answers, built from the APIs it serves.

Example::

    apis = [ApiDoc(name="iris", kind="request_handler", model_format="onnx", inputs=[...], raw_model=False)]
    document = openapi_document(apis, title="localserve", example=sample)
    add_v2_paths(document, [api for api in apis if api.model_format])  # openapi_v2: once the V2 routes exist

Pure functions of plain data (``ApiDoc``), so the document can be checked without a server.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from localserve import __version__
from localserve.server.openapi_tensors import fits_inputs, model_example, model_request_schema

JSON = "application/json"
ERROR_REF = {"$ref": "#/components/schemas/Error"}


@dataclass(frozen=True)
class ApiDoc:
    """What the document says about one API."""

    name: str
    kind: str  # abeja | request_handler | predictor
    model_format: str | None = None  # onnx | tensorflow
    inputs: Sequence[dict[str, Any]] = ()  # [{"name", "type", "shape"}] once the model is loaded
    outputs: Sequence[dict[str, Any]] = ()
    raw_model: bool = False  # the request body goes to the model as is (no pre_inference, no predictor)
    example: Any = None  # a JSON request body (the project's sample.json)
    serves_root: bool = False  # the only API: it also answers at "/" (and "/predict")
    extra: dict[str, Any] = field(default_factory=dict)


def error_responses(*codes: int) -> dict[str, Any]:
    """The documented error responses for ``codes`` (each a JSON Error)."""
    reasons = {
        400: "The request does not fit what the API expects.",
        404: "No such route or API.",
        413: "The body is larger than --max-body-size.",
        415: "The body's Content-Type is not one the API reads (a request handler reads JSON).",
        500: "The user code raised, or returned something that cannot be sent.",
        503: "The API is not ready, or its queue is full (Retry-After).",
        504: "The request took longer than the API's timeout.",
    }
    return {str(c): {"description": reasons[c], "content": {JSON: {"schema": ERROR_REF}}} for c in codes}


def _api_request_body(api: ApiDoc) -> dict[str, Any]:
    upload = {
        "type": "object",
        "properties": {"file": {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}},
    }
    content: dict[str, Any]
    if api.raw_model and api.inputs:
        example = api.example if fits_inputs(api.example, api.inputs) else model_example(api.inputs)
        content = {JSON: {"schema": model_request_schema(api.inputs), "example": example}}
    elif api.kind == "request_handler":  # its sample is the body parsed as JSON, nothing else
        content = {JSON: {"schema": {}} | ({} if api.example is None else {"example": api.example})}
    else:
        json_body: dict[str, Any] = {"schema": {}}
        if api.example is not None:
            json_body["example"] = api.example
        content = {
            JSON: json_body,
            "multipart/form-data": {"schema": upload},
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
            },
            "text/plain": {"schema": {"type": "string"}},
        }
    return {"required": api.kind != "abeja", "content": content}


def _api_responses(api: ApiDoc) -> dict[str, Any]:
    answer: dict[str, Any] = {"*/*": {"schema": {}}}
    if api.kind == "abeja":  # the handler chooses its status and body, errors included
        return {
            "default": {
                "description": "What the handler returned (its status_code, content_type and content); or "
                "localserve's JSON error (413, 500, 503, 504).",
                "content": answer,
            }
        }
    codes = (400, 413, 415, 500, 503, 504) if api.kind == "request_handler" else (400, 413, 500, 503, 504)
    return {
        "200": {"description": "What the API returned.", "content": answer},
        **error_responses(*codes),
    }


def _describe_text(api: ApiDoc) -> str:
    if api.kind == "abeja":
        return "An ABEJA handler: `handler(request, context)` receives the body whatever its Content-Type."
    lines = []
    if api.raw_model:
        lines.append("The JSON body goes to the model as is: a dict of input name -> nested lists.")
    elif api.kind == "request_handler":
        lines.append("The payload goes through `pre_inference`, the model, then `post_inference`.")
    else:
        lines.append("The payload goes to the predictor's `predict`.")
    if api.inputs:
        shown = ", ".join(f"`{i['name']}` {i['type']} {i['shape']}" for i in api.inputs)
        lines.append(f"Model inputs: {shown}.")
    return " ".join(lines)


def api_paths(api: ApiDoc) -> dict[str, Any]:
    """The paths of one API: ``POST /<name>``, ``/<name>/predict``, ``GET /<name>``, its stats (and ``/``)."""
    tag = [api.name]
    predict = {
        "summary": f"Send a request to {api.name!r}",
        "description": _describe_text(api),
        "tags": tag,
        "requestBody": _api_request_body(api),
        "responses": _api_responses(api),
    }
    describe = {
        "summary": f"Describe {api.name!r}: kind, model format, device, inputs and outputs",
        "tags": tag,
        "responses": {"200": {"description": "The API's description.", "content": {JSON: {"schema": {}}}}},
    }
    stats = {
        "summary": f"Request counts, latency and tracker of {api.name!r}",
        "tags": tag,
        "responses": {"200": {"description": "The API's stats.", "content": {JSON: {"schema": {"type": "object"}}}}},
    }
    paths: dict[str, Any] = {
        f"/{api.name}": {"get": {**describe, "operationId": f"describe_{api.name}"}},
        f"/{api.name}/predict": {"post": {**predict, "operationId": f"predict_{api.name}"}},
        f"/{api.name}/stats": {"get": {**stats, "operationId": f"stats_{api.name}"}},
    }
    paths[f"/{api.name}"]["post"] = {**predict, "operationId": f"post_{api.name}"}
    if api.serves_root:
        paths["/"] = {
            "post": {**predict, "operationId": "post_root"},
            "get": {**describe, "operationId": "describe_root"},
        }
        paths["/predict"] = {"post": {**predict, "operationId": "predict_root"}}
    if api.kind == "abeja":
        _abeja_methods(paths, predict, api.name)
    return paths


def _abeja_methods(paths: dict[str, Any], predict: dict[str, Any], name: str) -> None:
    """An ABEJA handler also receives GET (but ``GET /<api>``, which describes it), PUT, PATCH and DELETE, as
    ``server/routes.py`` passes them (``ABEJA_METHODS``)."""
    get = {**predict, "summary": f"GET to {name!r} (the query string is the body)"}
    del get["requestBody"]
    for path, item in paths.items():
        if "post" not in item:
            continue
        operation = item["post"]["operationId"].removeprefix("post_")
        if "get" not in item or path in ("/", "/predict"):
            item["get"] = {**get, "operationId": f"get_{operation}"}
        for method in ("put", "patch", "delete"):
            item[method] = {
                **predict,
                "operationId": f"{method}_{operation}",
                "summary": f"{method.upper()} to {name!r}",
            }


def get_route(summary: str, tag: str, operation_id: str, content: dict[str, Any], *errors: int) -> dict[str, Any]:
    """A path item answering GET with ``content`` (and the errors ``errors``)."""
    return {
        "get": {
            "summary": summary,
            "operationId": operation_id,
            "tags": [tag],
            "responses": {"200": {"description": summary, "content": content}, **error_responses(*errors)},
        }
    }


def server_paths(apis: Iterable[str]) -> dict[str, Any]:
    """Health, readiness, metrics, stats and the pages, as every replica answers them."""
    status = {JSON: {"schema": {"$ref": "#/components/schemas/Status"}}}
    ready = {JSON: {"schema": {"$ref": "#/components/schemas/Ready"}}}
    paths = {
        "/healthz": get_route("The server is alive", "health", "healthz", status),
        "/health_check": get_route("The server is alive (ABEJA's path)", "health", "health_check", status),
        "/readyz": get_route("Every API is loaded", "health", "readyz", ready, 503),
        "/v2/health/live": get_route("The server is alive (Open Inference Protocol)", "health", "v2_live", status),
        "/v2/health/ready": get_route(
            "Every API is loaded (Open Inference Protocol)", "health", "v2_ready", ready, 503
        ),
        "/metrics": get_route("Prometheus metrics", "observability", "metrics", {"text/plain": {"schema": {}}}, 404),
        "/stats": get_route(
            "Request counts, latency and tracker of every API",
            "observability",
            "stats",
            {JSON: {"schema": {"type": "array"}}},
        ),
        "/openapi.json": get_route("This document", "pages", "openapi", {JSON: {"schema": {"type": "object"}}}),
        "/docs": get_route("Try the APIs from a browser", "pages", "docs", {"text/html": {"schema": {}}}),
        "/dashboard": get_route("A live dashboard of every API", "pages", "dashboard", {"text/html": {"schema": {}}}),
        "/favicon.ico": get_route("The pages' icon", "pages", "favicon", {"image/x-icon": {"schema": {}}}),
        "/dashboard/data": get_route(
            "The dashboard's figures (from /metrics and /stats)",
            "pages",
            "dashboard_data",
            {JSON: {"schema": {"type": "object"}}},
        ),
    }
    return paths


def splitter_paths(name: str, routes: str) -> dict[str, Any]:
    """The routes of a TrafficSplitter ``name`` (``routes``: its APIs and weights, in words): POST is the answer
    of the API it picks (header ``X-Localserve-Api``), GET its description."""
    post = {
        "post": {
            "tags": [name],
            "summary": f"TrafficSplitter: one of {routes}, picked by weight",
            "operationId": f"split_{name}",
            "description": "The request goes to the API picked, as its own request; the answer is that API's, "
            "with `X-Localserve-Api` naming it.",
            "requestBody": {"content": {"*/*": {"schema": {}}}},
            "responses": {"default": {"description": "The answer of the API picked"}},
        }
    }
    describe = get_route(f"TrafficSplitter {name!r}: its APIs and weights", name, f"describe_{name}", _ANY_JSON)
    return {
        f"/{name}": {**post, **describe},
        f"/{name}/predict": {"post": {**post["post"], "operationId": f"split_{name}_predict"}},
    }


_ANY_JSON = {JSON: {"schema": {"type": "object"}}}


def openapi_document(
    apis: Sequence[ApiDoc], *, title: str = "localserve", bearer: bool = False, root_path: str = ""
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of a server answering ``apis`` (with ``bearer``: every route needs the key;
    ``root_path``: ``--root-path``, its ``servers`` entry, so that "Try it out" goes through the proxy)."""
    paths: dict[str, Any] = {}
    for api in apis:
        paths.update(api_paths(api))
    paths.update(server_paths(api.name for api in apis))
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": __version__,
            "description": "The routes of this localserve server. Errors made by localserve are JSON "
            '`{"error": ..., "request_id": ...}`.',
        },
        "paths": dict(sorted(paths.items())),
        "tags": [{"name": api.name, "description": f"API {api.name!r} ({api.kind})"} for api in apis]
        + [{"name": n} for n in ("health", "observability", "pages")],  # "v2" with V2 models (openapi_v2)
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}, "request_id": {"type": "string"}},
                    "required": ["error"],
                },
                "Status": {"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]},
                "Ready": {
                    "type": "object",
                    "properties": {"status": {"type": "string"}, "apis": {"type": "object"}},
                    "required": ["status", "apis"],
                },
            }
        },
    }
    if root_path:
        document["servers"] = [{"url": root_path}]
    if bearer:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
