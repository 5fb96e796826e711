"""Model versions that ``str.isdigit`` takes and ``int`` refuses (``²``, 5,000 digits), on every route of a real
``localserve serve --grpc-port --hide-errors``, and as version folders while the models are watched."""

from __future__ import annotations

from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.conftest import free_port, wait_until
from tests.models import onnx_linear
from tests.multimodel.helpers import ONNX_PREDICTOR, X, add_version, models_dir, project_yaml
from tests.test_e2e import output_of, server

pytestmark = pytest.mark.slow

LONG = "1" * 5000


def not_a_version(shown: str) -> str:
    return f"model_version must be a whole number (at most 18 digits) or 'latest' (or 'highest'); got {shown}."


@pytest.mark.parametrize(("version", "shown"), [("²", "'²'"), (LONG, f"'{'1' * 56}..."), ("1e3", "'1e3'")])
def test_a_version_that_is_no_whole_number_is_a_400_on_every_route(
    make_project, tmp_path: Path, version: str, shown: str
) -> None:
    yaml = project_yaml("      dir: models\n") + "- {kind: api, name: single, model: single.onnx}\n"
    project = make_project({"cortex.yaml": yaml, "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1, 2]})
    onnx_linear(project / "single.onnx")
    message = not_a_version(shown)
    port = free_port()
    with server("--grpc-port", str(port), "--hide-errors", cwd=project) as (url, _), httpx.Client(base_url=url) as http:
        quoted = httpx.URL(f"/x/{version}").raw_path.decode().removeprefix("/x/")
        body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": X[0]}]}
        calls = [("POST", f"/multi?model=a&version={quoted}", X)]
        for model in ("multi.a", "single"):
            base = f"/v2/models/{model}/versions/{quoted}"
            calls += [("POST", f"{base}/infer", body), ("GET", base, None), ("GET", f"{base}/ready", None)]
            calls += [("GET", f"{base}/config", None), ("GET", f"{base}/stats", None)]
        for method, path, sent in calls:
            answer = http.request(method, path, json=sent)
            assert (answer.status_code, answer.json()["error"]) == (400, message), path[:80]
            assert answer.headers["x-request-id"]
            assert http.get("/v2/models/multi.a/versions/1/ready").status_code == 200  # the connection still serves
        assert http.get("/v2/models/single/versions/latest").json()["versions"] == [
            "1"
        ]  # Cortex's word for the highest
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            infer = service_pb2.ModelInferRequest(model_version=version)
            infer.inputs.add(name="x", datatype="FP32", shape=[1, 4])
            infer.raw_input_contents.append(np.asarray(X, dtype=np.float32).tobytes())
            for model in ("multi.a", "single"):
                infer.model_name = model
                for rpc, request in [
                    (stub.ModelInfer, infer),
                    (stub.ModelMetadata, service_pb2.ModelMetadataRequest(name=model, version=version)),
                    (stub.ModelReady, service_pb2.ModelReadyRequest(name=model, version=version)),
                    (stub.ModelConfig, service_pb2.ModelConfigRequest(name=model, version=version)),
                    (stub.ModelStatistics, service_pb2.ModelStatisticsRequest(name=model, version=version)),
                ]:
                    with pytest.raises(grpc.RpcError) as caught:
                        rpc(request)
                    assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)


def test_a_version_folder_that_is_no_whole_number_is_skipped_and_new_versions_still_come(
    make_project, tmp_path: Path
) -> None:
    project = make_project({"cortex.yaml": project_yaml("      dir: models\n"), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1]})
    add_version(project / "models", "a", 1).parent.rename(project / "models" / "a" / "²")
    add_version(project / "models", "a", 1)
    with server(cwd=project) as (url, proc):
        assert [m["version"] for m in httpx.get(f"{url}/v2/models").json()] == ["1"]
        add_version(project / "models", "a", 2)
        wait_until(
            lambda: [m["version"] for m in httpx.get(f"{url}/v2/models").json()] == ["1", "2"],
            "version 2 was picked up",
        )
        skipped = f"version folder {project / 'models' / 'a' / '²'} skipped: a version is a whole number of at most 18"
        assert output_of(proc).count(skipped) == 1, output_of(proc)


def test_answers_and_statistics_name_the_version_that_ran(make_project) -> None:
    project = make_project({"cortex.yaml": project_yaml("      dir: models\n"), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1, 2]})
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": X[0]}]}
    port = free_port()
    with server("--grpc-port", str(port), cwd=project) as (url, _), httpx.Client(base_url=url) as http:
        assert http.post("/v2/models/multi.a/infer", json=body).json()["model_version"] == "2"  # the highest
        assert http.post("/v2/models/multi.a/versions/1/infer", json=body).json()["model_version"] == "1"
        for asked, version in (("1", "1"), ("2", "2"), ("latest", "2")):
            stats = http.get(f"/v2/models/multi.a/versions/{asked}/stats").json()["model_stats"]
            assert [entry["version"] for entry in stats] == [version]
        single = http.post("/v2/models/multi.a/versions/latest/infer", json=body).json()["model_version"]
        assert single == "2"
        assert [e["version"] for e in http.get("/v2/models/multi.a/stats").json()["model_stats"]] == ["2"]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            for asked, ran in (("", "2"), ("1", "1"), ("2", "2")):
                infer = service_pb2.ModelInferRequest(model_name="multi.a", model_version=asked)
                infer.inputs.add(name="x", datatype="FP32", shape=[1, 4])
                infer.raw_input_contents.append(np.asarray(X, dtype=np.float32).tobytes())
                assert stub.ModelInfer(infer).model_version == ran
                statistics = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name="multi.a", version=asked))
                assert [entry.version for entry in statistics.model_stats] == [ran]
