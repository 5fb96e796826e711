"""The OpenAPI document and the server agree on what schemathesis found apart, each case exact."""

from __future__ import annotations

import shutil

import jsonschema
import pytest

from tests.conftest import EXAMPLES

ABEJA = """
def handler(request, context):
    with open("calls.txt", "a") as calls:
        calls.write(request["http_method"] + "\\n")
    return {"status_code": 200, "content_type": "application/json", "content": {"method": request["http_method"]}}
"""
IRIS_ROW = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [5.1, 3.5, 1.4, 0.2]}


@pytest.fixture
def project(make_project):
    root = make_project(
        {
            "cortex.yaml": "- kind: api\n  name: iris\n  model: iris.onnx\n- kind: api\n  name: echo\n  handler: echo:handler\n",
            "echo.py": ABEJA,
        }
    )
    shutil.copy(EXAMPLES / "iris_onnx" / "iris.onnx", root / "iris.onnx")
    return root


def test_an_abeja_handler_takes_the_methods_the_document_lists_and_no_other(project, serve) -> None:
    with serve(project) as client:
        paths = client.get("/openapi.json").json()["paths"]
        assert sorted(paths["/echo"]) == ["delete", "get", "patch", "post", "put"]  # GET describes it
        assert sorted(paths["/echo/predict"]) == ["delete", "get", "patch", "post", "put"]
        assert sorted(paths["/iris/predict"]) == ["post"]
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            assert client.request(method, "/echo", content=b"{}").json() == {"method": method}
        assert client.get("/echo/predict").json() == {"method": "GET"}
        head = client.head("/echo/predict")  # HEAD wherever GET is taken: the handler runs, no body comes back
        assert (head.status_code, head.headers["content-length"], head.content) == (200, "17", b"")  # {"method":"HEAD"}
        assert client.get("/echo").json()["kind"] == "abeja"
        for path in ("/echo", "/echo/predict"):
            refused = client.request("TRACE", path)
            allow = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
            assert (refused.status_code, refused.json()["error"], refused.headers["allow"]) == (
                405,
                f"Method TRACE is not allowed on {path}; it takes {allow}.",
                allow,
            )
            options = client.options(path)
            assert (options.status_code, options.headers["allow"]) == (204, allow)
    assert (project / "calls.txt").read_text().split() == ["POST", "PUT", "PATCH", "DELETE", "GET", "HEAD"]  # no TRACE


def test_v2_infer_requests_the_schema_refuses_are_refused_and_those_it_takes_are_taken(project, serve) -> None:
    with serve(project) as client:
        document = client.get("/openapi.json").json()
        infer = document["paths"]["/v2/models/iris/infer"]["post"]
        request_schema = infer["requestBody"]["content"]["application/json"]["schema"]
        response_schema = {
            **infer["responses"]["200"]["content"]["application/json"]["schema"],
            "components": document["components"],
        }
        for body, message in [
            (
                {"inputs": [IRIS_ROW], "outputs": None},
                "The request's 'outputs' must be a list of objects with a 'name', or left out; got null.",
            ),
            ({"inputs": [IRIS_ROW], "id": None}, "The request's 'id' must be a string, or left out; got null."),
            (
                {"inputs": [IRIS_ROW], "parameters": None},
                "The 'parameters' of the request must be an object, or left out; got null.",
            ),
            (
                {"inputs": [IRIS_ROW], "outputs": [{"name": "probabilities", "parameters": None}]},
                "The 'parameters' of output 'probabilities' must be an object, or left out; got null.",
            ),
            (
                {"inputs": [{**IRIS_ROW, "parameters": {"binary_data_size": None}}]},
                "Input 'input' has binary_data_size None; expected a whole number of bytes, 0 or more.",
            ),
            ({"inputs": []}, "Input 'input' is missing; the model expects 'input' (FP32 [-1, 4])."),
            (
                {"inputs": [IRIS_ROW], "outputs": [{}]},
                "Requested output 0 needs a 'name' string; got an object.",
            ),
        ]:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(body, request_schema)
            answer = client.post("/v2/models/iris/infer", json=body)
            assert (answer.status_code, answer.json()["error"]) == (400, message)
        for body in (
            {"inputs": [IRIS_ROW]},
            {"inputs": [{**IRIS_ROW, "shape": [1.0, 4.0]}], "outputs": [{"name": "probabilities"}], "id": "a"},
            {"inputs": [{**IRIS_ROW, "shape": [1, 4], "data": [[5.1, 3.5, 1.4, 0.2]]}]},
        ):
            jsonschema.validate(body, request_schema)
            answer = client.post("/v2/models/iris/infer", json=body)
            assert answer.status_code == 200, answer.text
            jsonschema.validate(answer.json(), response_schema)
            assert answer.json()["outputs"][0]["name"] == "probabilities"
