"""TrafficSplitters and multi-model APIs in the exports: an Istio VirtualService (kubernetes), a note (kserve)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from localserve.config import load_config
from localserve.export import kubernetes_manifests
from localserve.export.kserve import kserve_manifests
from localserve.export.splitters import multi_model_note
from tests.export.test_kserve import validate
from tests.export.test_kubernetes import K8S_VERSION

CONFIG = """
- name: iris-onnx
  kind: RealtimeAPI
  predictor: {type: python, path: p.py}
- name: iris-tf
  kind: RealtimeAPI
  predictor: {type: python, path: p.py}
- name: recorder
  kind: RealtimeAPI
  predictor: {type: python, path: p.py}
- name: iris
  kind: TrafficSplitter
  networking: {endpoint: /classify}
  apis:
    - {name: iris-onnx, weight: 30}
    - {name: iris-tf, weight: 70}
    - {name: recorder, weight: 50, shadow: true}
"""


def _documents(tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    (tmp_path / "cortex.yaml").write_text(CONFIG)
    text = kubernetes_manifests(load_config(tmp_path), "registry.example/iris:1", name="shop", namespace="ml")
    return text, list(yaml.safe_load_all(text))


def test_kubernetes_writes_a_virtual_service_with_the_weights_and_the_shadow_as_mirror(tmp_path: Path) -> None:
    text, documents = _documents(tmp_path)
    assert "# Each TrafficSplitter is a Service and an Istio VirtualService (weights, shadow as mirror).\n" in text
    kinds = [d["kind"] for d in documents]
    assert kinds == ["ConfigMap"] + ["Deployment", "Service", "HorizontalPodAutoscaler"] * 3 + [
        "Service",
        "VirtualService",
    ]
    labels = {
        "app.kubernetes.io/name": "localserve",
        "app.kubernetes.io/instance": "shop",
        "localserve.dev/traffic-splitter": "iris",
    }
    service, virtual = documents[-2:]
    kubernetes_validate.validate(service, K8S_VERSION, strict=True)
    assert service["metadata"] == {"name": "api-iris", "namespace": "ml", "labels": labels}
    assert service["spec"] == {"ports": [{"name": "http", "port": 8888, "protocol": "TCP"}]}
    assert virtual == {
        "apiVersion": "networking.istio.io/v1beta1",
        "kind": "VirtualService",
        "metadata": {"name": "api-iris", "namespace": "ml", "labels": labels},
        "spec": {
            "hosts": ["api-iris"],
            "http": [
                {
                    "name": "iris",
                    "match": [
                        {"uri": {"exact": "/classify"}},
                        {"uri": {"exact": "/iris"}},
                        {"uri": {"exact": "/predict"}},
                        {"uri": {"exact": "/iris/predict"}},
                    ],
                    "rewrite": {"uri": "/predict"},
                    "route": [
                        {
                            "destination": {"host": "api-iris-onnx", "port": {"number": 8888}},
                            "weight": 30,
                            "headers": {"response": {"set": {"x-localserve-api": "iris-onnx"}}},
                        },
                        {
                            "destination": {"host": "api-iris-tf", "port": {"number": 8888}},
                            "weight": 70,
                            "headers": {"response": {"set": {"x-localserve-api": "iris-tf"}}},
                        },
                    ],
                    "mirror": {"host": "api-recorder", "port": {"number": 8888}},
                    "mirrorPercentage": {"value": 50.0},
                }
            ],
        },
    }
    # Every destination is a Service the export wrote (an API's), on the port its pods serve.
    services = {d["metadata"]["name"] for d in documents if d["kind"] == "Service"}
    hosts = {r["destination"]["host"] for r in virtual["spec"]["http"][0]["route"]}
    assert hosts | {virtual["spec"]["http"][0]["mirror"]["host"]} <= services


def test_kserve_says_what_it_cannot_express(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text(CONFIG)
    text = kserve_manifests(load_config(tmp_path), "registry.example/iris:1", name="shop")
    assert (
        "# TrafficSplitter 'iris' (iris-onnx 30%, iris-tf 70%, recorder 50% (shadow)) is not exported: KServe routes "
        "only between the revisions of one InferenceService (canaryTrafficPercent);\n"
        "#   route between these InferenceServices with your ingress, or use `localserve export kubernetes` "
        "(an Istio VirtualService).\n"
    ) in text
    documents = list(yaml.safe_load_all(text))
    # Predictors only: no V2 API, so no ServingRuntime (its autoSelect would claim the namespace's models).
    assert [d["kind"] for d in documents] == ["ConfigMap"] + ["InferenceService"] * 3
    for document in documents[1:]:
        validate(document)


def test_multi_model_apis_are_named_in_the_header() -> None:
    text = """
- name: many
  kind: RealtimeAPI
  predictor: {type: onnx, path: p.py, models: {dir: s3://bucket/models/, cache_size: 2, disk_cache_size: 4}}
- name: pair
  kind: RealtimeAPI
  predictor: {type: tensorflow, path: p.py, models: {paths: [{name: a, path: a/}]}}
- name: one
  kind: RealtimeAPI
  predictor: {type: onnx, path: p.py, models: {path: m.onnx}}
- name: py
  kind: RealtimeAPI
  predictor: {type: python, path: p.py, multi_model_reloading: {dir: weights}}
"""
    assert multi_model_note(text) == (
        "# Multi-model APIs (many, pair, py) load their models in each pod, from the image, s3:// or https://; "
        "cache_size and disk_cache_size apply per pod.\n"
        "#   Over the Open Inference Protocol each model of an onnx or tensorflow one is the model <api>.<model> "
        "(GET /v2/models lists them).\n"
    )
    assert multi_model_note("- {kind: api, name: x, model: m.onnx}") == ""
    assert multi_model_note("name: [") == ""
