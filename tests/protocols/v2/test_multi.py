"""The models of a multi-model API over the Open Inference Protocol: ``<api>.<model>``, versions as V2 versions,
a batcher per model version (requests for different models never share a batch), the unmodified tritonclient.

Through the app in-process, but for the unmodified tritonclient (HTTP and gRPC), which needs a real socket."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest
import tritonclient.http as triton

from tests.conftest import free_port, triton_http, wait_until
from tests.multimodel.helpers import ONNX_PREDICTOR, X, expected, models_dir, project_yaml
from tests.test_e2e import server

BLOCKING_PREDICTOR = """
import threading

started, release = threading.Event(), threading.Event()


class ONNXPredictor:
    def __init__(self, onnx_client, config):
        self.client = onnx_client

    def predict(self, payload):
        if payload[0] == "block":
            started.set()
            release.wait(30)
        return ["done"] * len(payload)
"""


def v2_body(rows: list[list[float]]) -> tuple[bytes, dict[str, str]]:
    given = triton.InferInput("x", [len(rows), 4], "FP32")
    given.set_data_from_numpy(np.array(rows, dtype=np.float32), binary_data=True)
    wanted = triton.InferRequestedOutput("logits", binary_data=True)
    body, length = triton.InferenceServerClient.generate_request_body([given], outputs=[wanted])
    return bytes(body), {"Inference-Header-Content-Length": str(length)}


def logits_of(response) -> list[list[float]]:
    length = int(response.headers["inference-header-content-length"])
    parsed = triton.InferenceServerClient.parse_response_body(response.content, header_length=length)
    return parsed.as_numpy("logits").tolist()


def test_listing_metadata_versions_and_errors(serve, make_project) -> None:
    project = make_project({"cortex.yaml": project_yaml("      dir: models\n"), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1, 2], "b": [3]})
    with serve(project) as client:
        assert client.get("/v2/models").json() == [
            {"name": "multi.a", "version": "1", "state": "READY"},
            {"name": "multi.a", "version": "2", "state": "READY"},
            {"name": "multi.b", "version": "3", "state": "READY"},
        ]
        assert client.post("/v2/repository/index").json() == client.get("/v2/models").json()
        metadata = client.get("/v2/models/multi.a").json()
        assert (metadata["name"], metadata["versions"], metadata["platform"]) == (
            "multi.a",
            ["1", "2"],
            "onnxruntime_onnx",
        )
        assert [i["name"] for i in metadata["inputs"]] == ["x"]
        assert client.get("/v2/models/multi.a/config").json()["version_policy"] == {"all": {}}
        for path, model, version in (
            ("/v2/models/multi.a/infer", "a", 2),
            ("/v2/models/multi.a/versions/1/infer", "a", 1),
            ("/v2/models/multi.b/infer", "b", 3),
        ):
            body, headers = v2_body(X)
            response = client.post(path, content=body, headers=headers)
            assert response.status_code == 200, response.text
            assert logits_of(response) == expected(model, version)
        body, headers = v2_body(X)
        missing = client.post("/v2/models/multi.zebra/infer", content=body, headers=headers)
        assert (missing.status_code, missing.json()["error"]) == (
            404,
            "Model 'zebra' wasn't found in the list of available models; the models are: 'a', 'b'.",
        )
        no_version = client.get("/v2/models/multi.a/versions/9")
        assert (no_version.status_code, no_version.json()["error"]) == (
            404,
            "Model 'a' has no version 9; its versions are: 1, 2.",
        )
        whole = client.get("/v2/models/multi").json()["error"]
        assert whole == (
            "API 'multi' serves several models; over the Open Inference Protocol each is a model of its own, "
            "named 'multi.<model>' (GET /v2/models/stats lists them)."
        )


def test_requests_for_different_models_never_share_a_batch(serve, make_project) -> None:
    yaml = project_yaml("      dir: models\n", extra="  batching: {max_batch_size: 8, batch_interval: 10s}\n")
    project = make_project({"cortex.yaml": yaml, "predictor.py": BLOCKING_PREDICTOR})
    models_dir(project / "models", {"a": [1], "b": [1]})
    plan = ["a", "b", "a", "a", "b"]
    with serve(project) as client:
        import predictor

        pool = concurrent.futures.ThreadPoolExecutor(8)
        first = pool.submit(client.post, "/multi", json="block")
        assert predictor.started.wait(30)
        futures = []
        for i, model in enumerate(plan):
            body, headers = v2_body([[float(i), 1.0, 2.0, 3.0]])
            futures.append(pool.submit(client.post, f"/v2/models/multi.{model}/infer", content=body, headers=headers))
        pipeline = client.app.apis["multi"].pipeline
        wait_until(lambda: pipeline.queue.depth == len(plan), "the V2 requests queued behind the blocked thread")
        predictor.release.set()
        responses = [f.result(30) for f in futures]
        assert first.result(30).text == "done"
        batches = client.get("/multi").json()["models"]["batches"]
        # Each model version has its own batcher, running that version's own model (its own sessions), warmed
        # for its own bucket sizes.
        routes = client.app.apis["multi"].pipeline.routes
        models = client.app.apis["multi"].endpoint.models
        owned = {key: (model, batcher) for key, (model, batcher) in routes.batchers.items()}
        assert sorted(owned) == [("a", 1), ("b", 1)]
        for (name, version), (model, batcher) in owned.items():
            assert batcher.model is model is models.get(name, version)[2]
            assert batcher.buckets == (1, 2, 4, 8) and batcher.name == f"multi.{name}"
        assert owned["a", 1][0] is not owned["b", 1][0]
        pool.shutdown()
    for i, (model, response) in enumerate(zip(plan, responses, strict=True)):
        assert response.status_code == 200, response.text
        assert logits_of(response) == expected(model, 1, [[float(i), 1.0, 2.0, 3.0]])
    assert batches == {"a/1": [3], "b/1": [2]}  # one model call for the 3 rows of a, another for the 2 of b


@pytest.mark.slow
def test_tritonclient_reaches_one_model_of_a_real_server(make_project) -> None:
    project = make_project({"cortex.yaml": project_yaml("      dir: models\n"), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1], "b": [1, 4]})
    with server(cwd=project) as (url, _), triton_http(url) as client:
        assert client.is_model_ready("multi.b", "4")
        assert client.get_model_metadata("multi.b")["versions"] == ["1", "4"]
        given = triton.InferInput("x", [1, 4], "FP32")
        given.set_data_from_numpy(np.array(X, dtype=np.float32))
        result = client.infer("multi.b", [given], model_version="1")
        assert result.as_numpy("logits").tolist() == expected("b", 1)
        assert client.infer("multi.b", [given]).as_numpy("logits").tolist() == expected("b", 4)
        index = client.get_model_repository_index()
        assert [(m["name"], m["version"]) for m in index] == [("multi.a", "1"), ("multi.b", "1"), ("multi.b", "4")]


@pytest.mark.slow
def test_tritonclient_grpc_reaches_one_model(make_project) -> None:
    import tritonclient.grpc as triton_grpc

    project = make_project({"cortex.yaml": project_yaml("      dir: models\n"), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1, 2]})
    port = free_port()
    with server("--grpc-port", str(port), cwd=project):
        client = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            assert client.is_model_ready("multi.a")
            assert client.get_model_metadata("multi.a", as_json=True)["versions"] == ["1", "2"]
            given = triton_grpc.InferInput("x", [1, 4], "FP32")
            given.set_data_from_numpy(np.array(X, dtype=np.float32))
            result = client.infer("multi.a", [given], model_version="1")
            assert result.as_numpy("logits").tolist() == expected("a", 1)
            assert client.infer("multi.a", [given]).as_numpy("logits").tolist() == expected("a", 2)
        finally:
            client.close()


@pytest.mark.slow
def test_the_dashboard_shows_each_model_version(make_project, tmp_path) -> None:
    import httpx

    from tests import browser

    if browser.chromium_missing() is not None:
        pytest.skip(browser.chromium_missing() or "")
    models = "      dir: models\n      cache_size: 1\n      disk_cache_size: 2\n"
    project = make_project({"cortex.yaml": project_yaml(models), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1], "b": [2]})
    with server(cwd=project) as (url, _):
        for model in ("a", "b", "a"):
            assert httpx.post(f"{url}/multi?model={model}", json=X).status_code == 200
        with browser.browser_page() as page:
            browser.open_dashboard(page, url)
            rows = page.locator('[data-api="multi"] table.models tr[data-model]')
            rows.first.wait_for()
            cells = [rows.nth(i).locator("td").all_inner_texts() for i in range(rows.count())]
            errors = page.errors
    assert [c[:5] for c in cells] == [["a", "1", "2", "1", cells[0][4]], ["b", "2", "1", "1", cells[1][4]]]
    assert all(c[4].endswith(" ms") and c[6].endswith(" ms") for c in cells)
    assert [c[5] for c in cells] == ["2", "1"]  # calls
    assert errors == []


def test_a_corrupt_version_is_a_503_naming_no_server_path_and_a_link_out_of_its_model_is_not_served(
    serve, make_project, tmp_path, caplog
) -> None:
    """A version whose file does not parse is unavailable (503, so a client retries; listed UNAVAILABLE once its
    load failed, and tried again only when its files change); a version folder linking out of the model is never
    listed nor served."""
    yaml = project_yaml("      dir: models\n      cache_size: 2\n      disk_cache_size: 2\n")
    project = make_project({"cortex.yaml": yaml, "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1], "b": [3]})
    (project / "models" / "a" / "2").mkdir()
    (project / "models" / "a" / "2" / "model.onnx").write_bytes(b"not a model")
    outside = models_dir(tmp_path / "elsewhere", {"b": [7]})
    (project / "models" / "b" / "7").symlink_to(outside / "b" / "7")
    unavailable = (
        "Model 'a' version 2 cannot be loaded: Cannot load ONNX model model.onnx: [ONNXRuntimeError] : 7 : "
        "INVALID_PROTOBUF : Load model from model.onnx failed:Protobuf parsing failed."
    )
    with serve(project) as client:
        for _ in range(2):
            latest = client.post("/multi?model=a", json=X)
            assert (latest.status_code, latest.json()["error"]) == (503, unavailable)
        assert client.post("/multi?model=a&version=1", json=X).json() == {"logits": expected("a", 1)}
        body, headers = v2_body(X)
        v2 = client.post("/v2/models/multi.a/infer", content=body, headers=headers)
        assert (v2.status_code, v2.json()) == (503, {"error": unavailable})
        assert client.get("/v2/models").json() == [
            {"name": "multi.a", "version": "1", "state": "READY"},
            {"name": "multi.a", "version": "2", "state": "UNAVAILABLE", "reason": unavailable},
            {"name": "multi.b", "version": "3", "state": "READY"},
        ]
        linked = client.post("/multi?model=b&version=7", json=X)
        assert (linked.status_code, linked.json()["error"]) == (404, "Model 'b' has no version 7; its versions are: 3.")
        assert client.post("/multi?model=b", json=X).json() == {"logits": expected("b", 3)}
    assert str(tmp_path) not in latest.text + v2.text
    assert caplog.text.count("model 'a' version 2 does not load: Cannot load ONNX model") == 1  # tried once
    assert caplog.text.count("version 7 is a link to") == 1
    assert "to api None" not in caplog.text


def test_statistics_have_an_entry_per_version_with_what_ran_it_over_rest_and_grpc(serve, make_project) -> None:
    """Triton's *Statistics Extension*: an entry per model version, named by its version; each counts the V2
    requests that ran that version (their rows: inference_count) and its model calls (execution_count)."""
    import tritonclient.grpc as triton_grpc

    from localserve.config.options import ServeOptions

    project = make_project({"cortex.yaml": project_yaml("      dir: models\n"), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1, 2], "b": [3]})
    port = free_port()
    with serve(project, ServeOptions(grpc_port=port)) as client:
        for path, rows, ran in (
            ("/v2/models/multi.a/versions/1/infer", 2, "1"),
            ("/v2/models/multi.a/infer", 1, "2"),
            ("/v2/models/multi.a/versions/latest/infer", 3, "2"),
        ):
            body = {"inputs": [{"name": "x", "shape": [rows, 4], "datatype": "FP32", "data": X[0] * rows}]}
            answer = client.post(path, json=body)
            assert (answer.status_code, answer.json()["model_version"]) == (200, ran), path
        native = client.post("/multi?model=a", json=X)  # counted under the API; a call of version 2
        assert native.json() == {"logits": expected("a", 2)}
        grpc = triton_grpc.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            given = triton_grpc.InferInput("x", [1, 4], "FP32")
            given.set_data_from_numpy(np.array(X, dtype=np.float32))
            assert grpc.infer("multi.a", [given], model_version="1").get_response().model_version == "1"
            every = grpc.get_inference_statistics().model_stats
            one = grpc.get_inference_statistics("multi.a", "1").model_stats
        finally:
            grpc.close()

        def figures(entry: dict) -> tuple[str, str, int, int, int]:
            success = entry["inference_stats"]["success"]["count"]
            return entry["name"], entry["version"], success, entry["inference_count"], entry["execution_count"]

        expected_entries = [("multi.a", "1", 2, 3, 2), ("multi.a", "2", 2, 4, 3), ("multi.b", "3", 0, 0, 0)]
        assert [figures(e) for e in client.get("/v2/models/stats").json()["model_stats"]] == expected_entries
        assert [
            (e.name, e.version, e.inference_stats.success.count, e.inference_count, e.execution_count) for e in every
        ] == expected_entries
        assert [(e.name, e.version, e.inference_count) for e in one] == [("multi.a", "1", 3)]
        for asked, entry in (("1", expected_entries[0]), ("2", expected_entries[1]), ("latest", expected_entries[1])):
            stats = client.get(f"/v2/models/multi.a/versions/{asked}/stats").json()["model_stats"]
            assert [figures(e) for e in stats] == [entry], asked
