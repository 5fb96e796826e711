"""The native routes: ``/<api>`` describes the API on GET, and an ABEJA handler keeps the root for every method."""

from __future__ import annotations


def test_get_on_a_named_cortex_style_route_describes_the_api(serve, make_project) -> None:
    project = make_project({"main.py": "def handler(request, context):\n    return {}\n"})
    with serve(project, handler="main:handler") as client:
        assert client.get("/proj").json() == {
            "name": "proj",
            "kind": "abeja",
            "handler": "main:handler",
            "model_format": None,
            "status": "ready",
        }
        assert client.get("/v2/health/ready").status_code == 200
        assert client.get("/health_check").status_code == 200


METHOD_ECHO = """
import json


def handler(request, context):
    body = json.dumps({"method": request["http_method"], "path": request.get("path")})
    return {"status_code": 200, "content_type": "application/json", "content": body}
"""


def test_an_abeja_handler_keeps_the_root_for_every_method_beside_the_pages(make_project, serve) -> None:
    project = make_project({"main.py": METHOD_ECHO})
    with serve(project, handler="main:handler") as client:
        seen = {m: client.request(m, "/").json()["method"] for m in ("GET", "POST", "PUT", "PATCH", "DELETE")}
        pages = [client.get(path).status_code for path in ("/docs", "/dashboard", "/openapi.json")]
    assert seen == {m: m for m in ("GET", "POST", "PUT", "PATCH", "DELETE")}
    assert pages == [200, 200, 200]
