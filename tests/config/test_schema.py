"""What an ApiConfig says of itself: its kind, where its model is, how many processes it runs, and the
predictor class and model cache it names."""

from __future__ import annotations

from localserve.config.schema import ApiConfig, ComputeConfig, ModelsConfig, PredictorConfig


def test_the_kind_follows_what_the_api_serves() -> None:
    assert ApiConfig("a", handler="main:handler").kind == "abeja"
    assert ApiConfig("a", predictor=PredictorConfig("python", "p.py")).kind == "predictor"
    assert ApiConfig("a", model="m.onnx").kind == "request_handler"
    assert ApiConfig("a", model="m.onnx", api_kind="AsyncAPI").is_async
    assert not ApiConfig("a", model="m.onnx", api_kind="RealtimeAPI").is_async


def test_the_model_is_the_predictors_model_path_before_the_apis_model() -> None:
    assert ApiConfig("a", model="m.onnx").model_location == "m.onnx"
    predictor = PredictorConfig("onnx", "p.py", model_path="p.onnx")
    assert ApiConfig("a", model="m.onnx", predictor=predictor).model_location == "p.onnx"
    assert ApiConfig("a", predictor=PredictorConfig("python", "p.py")).model_location is None


def test_processes_are_replicas_times_processes_per_replica() -> None:
    assert ApiConfig("a", model="m").processes == 1
    api = ApiConfig("a", model="m", compute=ComputeConfig(min_replicas=2, init_replicas=3), processes_per_replica=2)
    assert api.compute.replicas == 3
    assert api.processes == 6


def test_predictor_classes_and_model_caching() -> None:
    assert PredictorConfig("tensorflow", "p.py").class_name == "TensorFlowPredictor"
    assert not ModelsConfig(dir="models").caching
    assert ModelsConfig(dir="models", cache_size=2, disk_cache_size=4).caching
