"""The pages for people: /openapi.json, /docs and /dashboard (its data: test_dashboard.py), through the real app."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from openapi_spec_validator import validate
from starlette.testclient import TestClient

from localserve.server import ServeOptions
from tests.conftest import EXAMPLES
from tests.models import onnx_two_inputs

ECHO = (EXAMPLES / "multipart_echo" / "main.py").read_text()
SAMPLE = json.loads((EXAMPLES / "iris_onnx" / "sample.json").read_text())


def pages_project(make_project: Callable[..., Path]) -> Path:
    """Three APIs: iris (pre_inference + ONNX, tracker), two (a raw two-input ONNX model), echo (ABEJA multipart)."""
    project = make_project(
        {
            "cortex.yaml": """
            - kind: api
              name: iris
              model: iris.onnx
              request_handler: handler.py
              tracker: {key: class_label, model_type: classification}
              batching: {max_batch_size: 4, batch_interval: 1ms}
            - kind: api
              name: two
              model: two.onnx
            - kind: api
              name: echo
              handler: echo:handler
            """,
            "echo.py": ECHO,
            "sample.json": json.dumps(SAMPLE),
        }
    )
    shutil.copy(EXAMPLES / "iris_onnx" / "iris.onnx", project / "iris.onnx")
    # the example's handler, but one that fails on a sample it cannot use (a 500 for the figures)
    strict = "def pre_inference(sample, metadata):\n    return {metadata[0].name: [sample[k] for k in features]}\n"
    (project / "handler.py").write_text((EXAMPLES / "iris_onnx" / "handler.py").read_text() + "\n\n" + strict)
    onnx_two_inputs(project / "two.onnx")
    return project


def test_openapi_document_is_valid_and_describes_every_route(make_project, serve) -> None:
    with serve(pages_project(make_project)) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    validate(document)  # OpenAPI 3.1, by openapi-spec-validator
    assert document["openapi"] == "3.1.0"
    assert set(document["paths"]) == {
        *(f"/{api}{tail}" for api in ("iris", "two", "echo") for tail in ("", "/predict", "/stats")),
        # the Open Inference Protocol's routes, for the APIs whose model localserve runs (not the ABEJA handler)
        *(
            f"/v2/models/{api}{tail}"
            for api in ("iris", "two")
            for tail in ("", "/ready", "/config", "/stats", "/infer")
        ),
        "/v2",
        "/v2/models",
        "/v2/repository/index",
        "/v2/models/stats",
        "/healthz",
        "/health_check",
        "/readyz",
        "/v2/health/live",
        "/v2/health/ready",
        "/metrics",
        "/stats",
        "/openapi.json",
        "/docs",
        "/dashboard",
        "/dashboard/data",
        "/favicon.ico",
    }
    paths = document["paths"]
    # A raw model: the body is the model's inputs, by name, dtype and shape; the example is built from them
    # (the project's sample.json names other keys: it is for the API whose pre_inference reads it).
    two = paths["/two"]["post"]["requestBody"]["content"]
    assert list(two) == ["application/json"]
    assert two["application/json"]["schema"] == {
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
                    "minItems": 2,
                    "maxItems": 2,
                },
                "description": "int64 of shape [-1, 2]",
            },
            "scale": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {  # a number that float32 rounds to infinity is refused
                        "type": "number",
                        "exclusiveMinimum": -3.4028235677973366e38,
                        "exclusiveMaximum": 3.4028235677973366e38,
                    },
                    "minItems": 1,
                    "maxItems": 1,
                },
                "description": "float32 of shape [-1, 1]",
            },
        },
        "required": ["ids", "scale"],
        "additionalProperties": False,
    }
    assert two["application/json"]["example"] == {"ids": [[1, 1]], "scale": [[1]]}
    # An API with pre_inference takes any payload; its example is the project's sample.json.
    iris = paths["/iris"]["post"]
    assert iris["requestBody"]["content"]["application/json"] == {"schema": {}, "example": SAMPLE}
    assert iris["description"] == (
        "The payload goes through `pre_inference`, the model, then `post_inference`. "
        "Model inputs: `input` float32 ['batch', 4]."
    )
    # The ABEJA handler takes a file upload.
    echo = paths["/echo/predict"]["post"]["requestBody"]
    assert echo["required"] is False
    assert echo["content"]["multipart/form-data"]["schema"]["properties"]["file"]["format"] == "binary"
    assert set(echo["content"]) == {"application/json", "multipart/form-data", "application/octet-stream", "text/plain"}


def test_a_raw_model_without_sample_gets_an_example_of_ones(make_project, serve) -> None:
    project = make_project({"cortex.yaml": "- kind: api\n  name: two\n  model: two.onnx\n"})
    onnx_two_inputs(project / "two.onnx")
    with serve(project) as client:
        document = client.get("/openapi.json").json()
        body = document["paths"]["/two"]["post"]["requestBody"]["content"]["application/json"]
        assert body["example"] == {"ids": [[1, 1]], "scale": [[1]]}
        assert "anyOf" not in body["schema"]  # two inputs: only the dict of input name -> tensor
        answer = client.post("/two", json=body["example"])
    assert (answer.status_code, answer.json()) == (200, [[[1.0, 1.0]]])
    # the only API also answers at / and /predict
    assert {"/", "/predict"} <= set(document["paths"])
    assert document["paths"]["/"]["get"]["operationId"] == "describe_root"


def test_every_v2_path_in_the_document_answers(make_project, serve) -> None:
    with serve(pages_project(make_project)) as client:
        document = client.get("/openapi.json").json()
        validate(document)
        v2 = {path: item for path, item in document["paths"].items() if path.startswith("/v2")}
        assert {path for path, item in v2.items() if "post" in item} == {
            "/v2/models/iris/infer",
            "/v2/models/two/infer",
            "/v2/repository/index",
        }
        for path, item in v2.items():
            if "get" in item:
                response = client.get(path)
                assert response.status_code == 200, (path, response.text)
        example = v2["/v2/models/two/infer"]["post"]["requestBody"]["content"]["application/json"]["example"]
        response = client.post("/v2/models/two/infer", json=example)
        assert response.status_code == 200, response.text
        assert client.get("/v2/models/echo").json() == {
            "error": "API 'echo' is an ABEJA handler, which takes requests, not tensors; the Open Inference Protocol "
            "serves only APIs whose ONNX or TensorFlow model localserve runs itself. Use its own route (/echo)."
        }


def test_docs_serves_swagger_ui_from_the_package(make_project, serve) -> None:
    project = make_project({"main.py": ECHO})
    with serve(project, handler="main:handler") as client:
        page = client.get("/docs")
        script = client.get("/docs/swagger-ui-bundle.js")
        css = client.get("/docs/swagger-ui.css")
        ours = client.get("/docs/docs.js")
        missing = client.get("/docs/index.html")
        root = client.get("/")  # an ABEJA handler keeps "/" for every method, GET included
        document = client.get("/openapi.json").json()
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    # every asset from this server, none from a CDN
    assert '<script src="docs/swagger-ui-bundle.js"></script>' in page.text
    assert "http://" not in page.text and "https://" not in page.text
    assert "https://" not in ours.text and "validatorUrl: null" in ours.text
    assert script.status_code == 200 and "SwaggerUIBundle" in script.text
    assert script.headers["content-type"].startswith("text/javascript")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert missing.status_code == 404
    assert (root.status_code, root.json()) == (
        415,
        {"message": "expected multipart/form-data, got application/x-www-form-urlencoded"},
    )
    assert document["paths"]["/"]["get"]["operationId"] == "get_root"
    assert "requestBody" not in document["paths"]["/"]["get"]
    assert missing.json()["error"] == "No page '/docs/index.html'; the pages are /docs, /dashboard and /openapi.json."


@pytest.mark.parametrize("name", ["docs", "dashboard"])
def test_page_names_are_reserved(make_project, name: str) -> None:
    from localserve.config import load_config
    from localserve.errors import ConfigError

    project = make_project({"localserve.yaml": f"- kind: api\n  name: {name}\n  handler: main:handler\n"})
    with pytest.raises(ConfigError) as caught:
        load_config(project)
    assert str(caught.value) == (
        f"localserve.yaml: api '{name}': the name '{name}' is reserved by localserve (its own route /{name}); "
        "choose another."
    )


def test_with_an_api_key_the_pages_are_open_and_their_data_is_not(make_project, serve) -> None:
    from localserve.server.auth import ApiKeyMiddleware
    from localserve.server.pages import PAGE_PATHS

    project = make_project({"main.py": ECHO})
    with serve(project, handler="main:handler") as plain:
        client = TestClient(ApiKeyMiddleware(plain.app, "s3cret"))
        opened = {path: client.get(path).status_code for path in sorted(PAGE_PATHS)}
        refused = {path: client.get(path).status_code for path in ("/openapi.json", "/dashboard/data", "/docs/x")}
        keyed = client.get("/dashboard/data", headers={"authorization": "Bearer s3cret"})
    assert opened == dict.fromkeys(sorted(PAGE_PATHS), 200)
    assert len(opened) == 11  # the favicon among them
    assert refused == {"/openapi.json": 401, "/dashboard/data": 401, "/docs/x": 401}
    assert [api["name"] for api in keyed.json()["apis"]] == ["proj"]


def test_the_favicon_is_served(make_project, serve) -> None:
    project = make_project({"main.py": ECHO})
    with serve(project, handler="main:handler") as client:
        icon = client.get("/favicon.ico")
        pages = [client.get(page).text for page in ("/docs", "/dashboard")]
    assert (icon.status_code, icon.headers["content-type"]) == (200, "image/x-icon")
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO with one image: a 32 px PNG
    assert icon.content[22:30] == b"\x89PNG\r\n\x1a\n"
    assert all('<link rel="icon" href="favicon.ico">' in page for page in pages)  # relative: --root-path


def test_without_a_v2_model_the_document_has_no_v2_section(make_project, serve) -> None:
    project = make_project({"main.py": ECHO})
    with serve(project, handler="main:handler") as client:
        document = client.get("/openapi.json").json()
        missing = client.get("/v2/nope")
    tags = {tag for item in document["paths"].values() for operation in item.values() for tag in operation["tags"]}
    assert "v2" not in tags and "v2" not in {tag["name"] for tag in document["tags"]}
    assert [name for name in document["components"]["schemas"] if name.startswith("V2")] == []
    assert {"/v2", "/v2/health/live", "/v2/health/ready"} <= set(document["paths"])  # the server answers them
    assert (missing.status_code, missing.json()) == (
        404,
        {
            "error": "No route '/v2/nope'; the Open Inference Protocol's routes are /v2, "
            "/v2/health/live, /v2/health/ready."
        },
    )


def test_a_v2_404_lists_the_v2_routes(make_project, serve) -> None:
    project = make_project({"cortex.yaml": "- kind: api\n  name: iris\n  model: iris.onnx\n"})
    shutil.copy(EXAMPLES / "iris_onnx" / "iris.onnx", project / "iris.onnx")
    with serve(project) as client:
        document = client.get("/openapi.json").json()
        missing = client.get("/v2/models/iris/nope")
        native = client.get("/nope")
    assert "v2" in {tag["name"] for tag in document["tags"]}
    routes = ", ".join(f"/v2/models/iris{tail}" for tail in ("", "/ready", "/config", "/stats", "/infer"))
    assert (missing.status_code, missing.json()) == (
        404,
        {
            "error": "No route '/v2/models/iris/nope'; the Open Inference Protocol's routes are /v2, "
            f"/v2/health/live, /v2/health/ready, /v2/models/stats, {routes}."
        },
    )
    assert native.json()["error"] == "No route '/nope'; the APIs answer at /, /iris, /predict."


def test_a_sample_json_holding_nan_is_left_out_and_the_document_loads(make_project, serve, caplog) -> None:
    """Python reads NaN in a sample.json; JSON has no NaN, so the example is dropped."""
    project = make_project({"main.py": "def handler(request, context):\n    return {'content': 'ok'}\n"})
    (project / "sample.json").write_text('{"x": NaN}')
    with serve(project, handler="main:handler") as client:
        answer = client.get("/openapi.json")
        assert answer.status_code == 200
        validate(answer.json())
        body = answer.json()["paths"]["/proj"]["post"]["requestBody"]["content"]["application/json"]
        assert "example" not in body
        assert client.get("/openapi.json").status_code == 200
    warnings = [r.getMessage() for r in caplog.records if "sample.json" in r.getMessage()]
    assert warnings == ["sample.json holds NaN, which is not JSON: it is left out of /openapi.json's examples"]


def test_a_traffic_splitter_is_in_the_document(serve) -> None:
    """``kind: TrafficSplitter``'s routes: POST answered by the API it picks, GET its description."""
    with serve(EXAMPLES / "iris_splitter") as client:
        document = client.get("/openapi.json").json()
        described = client.get("/iris").json()
    validate(document)
    split = document["paths"]["/iris"]
    assert split["post"]["summary"] == (
        "TrafficSplitter: one of iris-onnx 80%, iris-rules 20%, iris-candidate 100% (shadow copy), picked by weight"
    )
    assert set(split) == {"post", "get"} and "post" in document["paths"]["/iris/predict"]
    assert "iris" in {tag["name"] for tag in document["tags"]} and isinstance(described, dict)


@pytest.mark.parametrize("root_path", ["", "/models"])
def test_a_trailing_slash_redirects_to_a_path_under_the_root_path_never_to_the_clients_host(
    make_project, serve, root_path: str
) -> None:
    project = make_project({"main.py": ECHO})
    with serve(project, ServeOptions(root_path=root_path), handler="main:handler") as client:
        answers = {
            path: client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
            for path in ("/docs/", "/dashboard//?interval=2", "/nowhere/")
        }
    assert {path: (a.status_code, a.headers.get("location")) for path, a in answers.items()} == {
        "/docs/": (307, f"{root_path}/docs"),
        "/dashboard//?interval=2": (307, f"{root_path}/dashboard?interval=2"),
        "/nowhere/": (404, None),
    }
