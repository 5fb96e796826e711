"""The HTTP API reference, from the OpenAPI document the server builds (``localserve.server.openapi*``).

The document is made by the server's own builders for a server with one API of each kind, so every
route, method, media type and status a server documents is listed here.
"""

from __future__ import annotations

import json
from typing import Any

from localserve.server.openapi import ApiDoc, openapi_document, splitter_paths
from localserve.server.openapi_v2 import add_v2_paths

IRIS_INPUTS = [{"name": "input", "type": "tensor(float)", "shape": [-1, 4]}]
IRIS_OUTPUTS = [{"name": "probabilities", "type": "tensor(float)", "shape": [-1, 3]}]
APIS = [
    ApiDoc(name="iris", kind="request_handler", model_format="onnx", inputs=IRIS_INPUTS, outputs=IRIS_OUTPUTS),
    ApiDoc(name="echo", kind="abeja"),
    ApiDoc(name="price", kind="predictor"),
]
METHODS = ("get", "head", "post", "put", "patch", "delete", "options")

INTRO = """# HTTP API

Every route a server answers, on one port, generated from the OpenAPI 3.1 document that
`GET /openapi.json` serves. The document below is the one a server with four entries builds: `iris` (a
request handler around an ONNX model, so also an Open Inference Protocol model), `echo` (an ABEJA
handler), `price` (a predictor) and `ab` (a TrafficSplitter). Your server's `/openapi.json` (and `/docs`,
Swagger UI on it) says the same for your APIs, with each model's real inputs.
[The whole document as JSON](openapi.json).

Errors made by localserve are JSON `{"error": "...", "request_id": "..."}` (the Open Inference Protocol's
routes: `{"error": "..."}`, the id in the `X-Request-ID` header); see [Statuses and errors](errors.md).
With `--api-key`, every route but the health probes needs `Authorization: Bearer <key>`.
"""

ASYNC = """## AsyncAPI routes

An API of `kind: AsyncAPI` answers on its name as well, but a submit returns at once:

| method and path | answer |
|---|---|
| `POST /<api>` (also `/<api>/predict`, and `/`, `/predict` when it is the only API) | `200 {"id": "<32 hex characters>"}` once the job is stored (413 beyond `--max-body-size`, nothing stored; 503 when the store cannot take it) |
| `GET /<api>/<id>` (`HEAD` too) | `200 {"id", "status"}`, `status` one of `in_queue`, `in_progress`, `completed` (with `result` and an RFC 3339 `timestamp`), `failed` (with `error` and `timestamp`) |
| `GET /<api>/<id>` of an id never submitted, or purged | `404 {"id", "status": "not_found", "error": "id <id> not found"}` |
| `GET /<api>/<id>` of a malformed id | `400` (`Invalid job id 'abc'; expected the 32 lower-case hex characters that POST /<api> answered.`) |
| `OPTIONS /<api>/<id>` | 204, `Allow: GET, HEAD, OPTIONS`; other methods 405 |
| `GET /<api>`, `GET /<api>/stats` | as for any API; `stats` adds the jobs (queued, running, completed, failed, mean time to result) |

See [AsyncAPI with a Redis store](../how-to/asyncapi-redis.md).
"""


def document() -> dict[str, Any]:
    """The OpenAPI document of the example server: native routes, the splitter, the V2 routes."""
    doc = openapi_document(APIS)
    doc["paths"].update(splitter_paths("ab", "iris 80%, price 20%"))
    doc["tags"].append({"name": "ab", "description": "TrafficSplitter 'ab'"})
    doc["paths"] = dict(sorted(doc["paths"].items()))
    add_v2_paths(doc, [api for api in APIS if api.model_format is not None])
    return doc


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _operation(path: str, method: str, op: dict[str, Any]) -> str:
    body = op.get("requestBody", {}).get("content", {})
    media = ", ".join(f"`{m}`" for m in body) or ""
    codes = ", ".join(f"`{code}`" for code in op.get("responses", {}))
    text = op.get("summary", "")
    if op.get("description"):
        text += f". {op['description']}"
    return f"| `{method.upper()} {path}` | {_cell(text)} | {media} | {codes} |"


def render() -> str:
    """The page: the routes by tag (each API, health, observability, pages, v2), then the AsyncAPI routes."""
    doc = document()
    by_tag: dict[str, list[str]] = {}
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                tag = (item[method].get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append(_operation(path, method, item[method]))
    out = [INTRO]
    for tag in [t["name"] for t in doc["tags"]]:
        if tag not in by_tag:
            continue
        title = {"v2": "Open Inference Protocol (V2 REST)"}.get(
            tag, f"`{tag}`" if tag in {a.name for a in APIS} | {"ab"} else tag.capitalize()
        )
        out += [f"## {title}", "", "| route | what it does | request body | statuses |", "|---|---|---|---|"]
        out += by_tag.pop(tag)
        out.append("")
    for tag, rows in by_tag.items():
        out += [f"## {tag}", "", "| route | what it does | request body | statuses |", "|---|---|---|---|", *rows, ""]
    out.append(ASYNC)
    schemas = doc["components"]["schemas"]
    out += ["## Schemas", ""]
    for name, schema in schemas.items():
        out += [f"### {name}", "", "```json", json.dumps(schema, indent=2)[:3000], "```", ""]
    return "\n".join(out)


def render_json() -> str:
    """The whole OpenAPI document."""
    return json.dumps(document(), indent=2)
