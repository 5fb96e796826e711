"""/openapi.json built from the APIs' descriptions: a valid OpenAPI document, the API key documented for every route.

The document served by the real app, route by route, is checked in tests/server/test_pages.py."""

from __future__ import annotations

from openapi_spec_validator import validate

from localserve.server.openapi import ApiDoc, openapi_document


def test_bearer_documents_the_key_for_every_route() -> None:
    document = openapi_document([ApiDoc(name="echo", kind="abeja")], bearer=True)
    validate(document)
    assert document["security"] == [{"bearer": []}]
    assert document["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}


def test_each_api_has_its_routes_and_the_only_one_serves_the_root_too() -> None:
    iris = ApiDoc(name="iris", kind="request_handler", model_format="onnx", serves_root=True)
    paths = openapi_document([iris])["paths"]
    assert {path: sorted(item) for path, item in paths.items() if "iris" in path or path in ("/", "/predict")} == {
        "/": ["get", "post"],
        "/iris": ["get", "post"],
        "/iris/predict": ["post"],
        "/iris/stats": ["get"],
        "/predict": ["post"],
    }
    assert paths["/iris"]["get"]["operationId"] == "describe_iris"
    assert paths["/"]["post"]["operationId"] == "post_root"


def test_an_abeja_handler_takes_every_method_but_get_on_its_own_route_which_describes_it() -> None:
    paths = openapi_document([ApiDoc(name="echo", kind="abeja")])["paths"]
    assert sorted(paths["/echo"]) == ["delete", "get", "patch", "post", "put"]
    assert paths["/echo"]["get"]["operationId"] == "describe_echo"
    assert sorted(paths["/echo/predict"]) == ["delete", "get", "patch", "post", "put"]
    assert paths["/echo/predict"]["get"]["operationId"] == "get_predict_echo"
    assert "requestBody" not in paths["/echo/predict"]["get"]


def test_the_root_path_is_the_documents_server() -> None:
    document = openapi_document([ApiDoc(name="echo", kind="abeja")], root_path="/api")
    validate(document)
    assert document["servers"] == [{"url": "/api"}]
    assert "servers" not in openapi_document([ApiDoc(name="echo", kind="abeja")])
