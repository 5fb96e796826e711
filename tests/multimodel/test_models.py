"""Cortex multi-model APIs (``models: {paths | dir}``): names, versions, the cache, its figures and errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.multimodel.helpers import ONNX_PREDICTOR, X, expected, models_dir, project_yaml


def make(make_project, tmp_path: Path, models: str, versions: dict[str, list[int]], **kw: str) -> Path:
    project = make_project({"cortex.yaml": project_yaml(models, **kw), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", versions)
    return project


def test_a_dir_of_three_models_with_a_cache_of_one(serve, make_project, tmp_path) -> None:
    project = make(
        make_project,
        tmp_path,
        "      dir: models\n      cache_size: 1\n      disk_cache_size: 3\n",
        {"a": [1, 2], "b": [1], "c": [3]},
    )
    # After each request, the figures' loads and evictions (what /metrics counts) and the version in memory.
    steps = [
        ("model=a", "a", 2, {"a/2": 1}, {}),
        ("model=b", "b", 1, {"a/2": 1, "b/1": 1}, {"a/2": 1}),
        ("model=b", "b", 1, {"a/2": 1, "b/1": 1}, {"a/2": 1}),  # cached: nothing loads
        ("model=c", "c", 3, {"a/2": 1, "b/1": 1, "c/3": 1}, {"a/2": 1, "b/1": 1}),
        ("model=a", "a", 2, {"a/2": 2, "b/1": 1, "c/3": 1}, {"a/2": 1, "b/1": 1, "c/3": 1}),
        ("model=a&version=1", "a", 1, {"a/1": 1, "a/2": 2, "b/1": 1, "c/3": 1}, {"a/2": 2, "b/1": 1, "c/3": 1}),
    ]
    with serve(project) as client:
        assert client.get("/multi").json()["models"]["in_memory"] == []  # nothing loads before its first use
        assert counted(client.get("/metrics").text, "localserve_model_loads_total") == {}
        for query, model, version, loads, evictions in steps:
            response = client.post(f"/multi?{query}", json=X)
            assert response.status_code == 200, response.text
            assert response.json() == {"logits": expected(model, version)}
            text = client.get("/metrics").text
            assert counted(text, "localserve_model_loads_total") == loads, query
            assert counted(text, "localserve_model_evictions_total") == evictions, query
            assert client.get("/multi").json()["models"]["in_memory"] == [{"model": model, "version": version}]
        described = client.get("/multi").json()["models"]
    assert described["in_memory"] == [{"model": "a", "version": 1}]
    assert described["available"] == {"a": [1, 2], "b": [1], "c": [3]}
    events = [(e["event"], e["model"], e["version"]) for e in described["events"]]
    assert events == [
        ("load", "a", 2),
        ("load", "b", 1),
        ("evict", "a", 2),
        ("load", "c", 3),
        ("evict", "b", 1),
        ("load", "a", 2),
        ("evict", "c", 3),
        ("load", "a", 1),
        ("evict", "a", 2),
    ]


def counted(text: str, family: str) -> dict[str, int]:
    """``{"<model>/<version>": n}``: one counter family of API ``multi`` in a /metrics page (evictions: by the cache)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith(family + "{"):
            continue
        labels = dict(part.split("=", 1) for part in line[len(family) + 1 : line.index("}")].split(","))
        labels = {key: value.strip('"') for key, value in labels.items()}
        if labels["api"] == "multi" and labels.get("reason", "cache") == "cache":
            found[f"{labels['model']}/{labels['version']}"] = int(float(line.rsplit(" ", 1)[1]))
    return found


def test_paths_without_the_cache_load_every_version_at_start(serve, make_project, tmp_path) -> None:
    models = "      paths:\n        - {name: first, path: models/a}\n        - {name: second, path: models/b}\n"
    project = make(make_project, tmp_path, models, {"a": [1, 2], "b": [5]})
    with serve(project) as client:
        described = client.get("/multi").json()["models"]
        assert described["in_memory"] == [
            {"model": "first", "version": 1},
            {"model": "first", "version": 2},
            {"model": "second", "version": 5},
        ]
        assert client.post("/multi?model=first", json=X).json() == {"logits": expected("a", 2)}
        assert client.post("/multi?model=second&version=latest", json=X).json() == {"logits": expected("b", 5)}
        assert client.post("/multi?model=first&version=1", json=X).json() == {"logits": expected("a", 1)}


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        (
            "model=zebra",
            404,
            "Model 'zebra' wasn't found in the list of available models; the models are: 'a', 'b'.",
        ),
        ("model=a&version=7", 404, "Model 'a' has no version 7; its versions are: 1, 2."),
        (
            "model=a&version=newest",
            400,
            "model_version must be a whole number (at most 18 digits) or 'latest' (or 'highest'); got 'newest'.",
        ),
        ("", 400, "model_name was not specified; choose one of the following: a, b."),
    ],
)
def test_unknown_model_and_version(serve, make_project, tmp_path, query: str, status: int, message: str) -> None:
    project = make(make_project, tmp_path, "      dir: models\n", {"a": [1, 2], "b": [1]})
    with serve(project) as client:
        response = client.post(f"/multi?{query}", json=X)
        assert response.status_code == status
        assert response.json()["error"] == message
        assert client.post("/multi?model=b", json=X).status_code == 200  # the API keeps answering


def test_figures_in_metrics_stats_get_and_dashboard(serve, make_project, tmp_path) -> None:
    from localserve.cli.get_tables import render_get

    project = make(
        make_project,
        tmp_path,
        "      dir: models\n      cache_size: 1\n      disk_cache_size: 2\n",
        {"a": [1], "b": [2]},
    )
    with serve(project) as client:
        for model in ("a", "b", "a"):
            assert client.post(f"/multi?model={model}", json=X).status_code == 200
        text = client.get("/metrics").text
        stats = client.get("/multi/stats").json()
        dashboard = client.get("/dashboard/data").json()
    assert 'localserve_model_loads_total{api="multi",model="a",version="1"} 2.0' in text
    assert 'localserve_model_loads_total{api="multi",model="b",version="2"} 1.0' in text
    assert 'localserve_model_evictions_total{api="multi",model="a",reason="cache",version="1"} 1.0' in text
    assert 'localserve_model_evictions_total{api="multi",model="b",reason="cache",version="2"} 1.0' in text
    assert 'localserve_model_duration_seconds_count{api="multi",model="a",version="1"} 2.0' in text
    models = stats["models"]
    assert [(m["model"], m["version"], m["loads"], m["evictions"], m["calls"]) for m in models] == [
        ("a", 1, 2, {"cache": 1}, 2),
        ("b", 2, 1, {"cache": 1}, 1),
    ]
    assert all(m["load_mean"] > 0 and m["latency_mean"] > 0 for m in models)
    table = render_get(stats).split("multi: models\n")[1].splitlines()
    assert table[0].split() == ["model", "version", "loads", "evictions", "load", "calls", "mean"]
    assert table[1].split()[:4] == ["a", "1", "2", "1"] and table[2].split()[:4] == ["b", "2", "1", "1"]
    assert [m["model"] for m in _dashboard_models(dashboard)] == ["a", "b"]


def _dashboard_models(data: dict) -> list[dict]:
    for api in data.get("apis", []):
        if api.get("name") == "multi":
            return api["figures"]["models"]
    raise AssertionError(data)


PYTHON_PREDICTOR = """
import json


class PythonPredictor:
    def __init__(self, python_client, config):
        self.client = python_client
        self.loaded = []

    def load_model(self, model_path):
        self.loaded.append(model_path.rsplit("/", 2)[-2:])
        with open(model_path + "/weights.json") as f:
            return json.load(f)

    def predict(self, payload, query_params):
        model = self.client.get_model(query_params["model"], query_params.get("version", "latest"))
        return {"answer": model["scale"] * payload, "loaded": self.loaded}
"""


def test_python_predictor_multi_model_reloading(serve, make_project) -> None:
    yaml = (
        "- name: py\n  kind: RealtimeAPI\n  predictor:\n    type: python\n    path: predictor.py\n"
        "    multi_model_reloading: {dir: weights, cache_size: 1, disk_cache_size: 2}\n"
    )
    files = {"cortex.yaml": yaml, "predictor.py": PYTHON_PREDICTOR}
    for model, version, scale in (("double", 1, 2), ("double", 2, 20), ("triple", 1, 3)):
        files[f"weights/{model}/{version}/weights.json"] = f'{{"scale": {scale}}}'
    project = make_project(files)
    with serve(project) as client:
        assert client.post("/py?model=double", json=5).json() == {"answer": 100, "loaded": [["double", "2"]]}
        assert client.post("/py?model=triple", json=5).json()["answer"] == 15
        last = client.post("/py?model=double&version=1", json=5).json()
        missing = client.post("/py?model=half", json=5)
    assert last == {"answer": 10, "loaded": [["double", "2"], ["triple", "1"], ["double", "1"]]}
    assert (missing.status_code, missing.json()["error"]) == (
        404,
        "Model 'half' wasn't found in the list of available models; the models are: 'double', 'triple'.",
    )


def test_the_iris_models_example(serve) -> None:
    from tests.conftest import EXAMPLES

    sample = {"input": [5.1, 3.5, 1.4, 0.2]}
    with serve(EXAMPLES / "iris_models") as client:
        answers = [
            client.post("/iris-models", json={**sample, **extra}).json()
            for extra in ({"model": "iris", "version": 1}, {"model": "sepals"}, {"model": "iris"})
        ]
        listed = [m["name"] for m in client.get("/v2/models").json()]
        events = [(e["event"], e["model"], e["version"]) for e in client.get("/iris-models").json()["models"]["events"]]
    assert [(a["model"], a["class_label"]) for a in answers] == [
        ("iris", "iris-setosa"),
        ("sepals", "iris-setosa"),
        ("iris", "iris-setosa"),
    ]
    assert answers[0]["probability"] < answers[2]["probability"]  # version 2 is surer than version 1
    assert listed == ["iris-models.iris", "iris-models.iris", "iris-models.sepals"]
    assert events == [
        ("load", "iris", 1),
        ("load", "sepals", 1),
        ("evict", "iris", 1),
        ("load", "iris", 2),
        ("evict", "sepals", 1),
    ]


def test_a_python_predictor_without_load_model_fails_to_load(make_project, monkeypatch) -> None:
    from localserve.config import load_config
    from localserve.config.options import ApiOptions
    from localserve.errors import HandlerLoadError
    from localserve.handlers import create_endpoint

    yaml = (
        "- name: py\n  kind: RealtimeAPI\n  predictor:\n    type: python\n    path: predictor.py\n"
        "    multi_model_reloading: {dir: weights}\n"
    )
    code = "class PythonPredictor:\n    def __init__(self, python_client):\n        pass\n\n    def predict(self):\n        pass\n"
    project = make_project({"cortex.yaml": yaml, "predictor.py": code, "weights/m/1/w.json": "{}"})
    monkeypatch.chdir(project)
    (api,) = load_config(project).apis
    endpoint = create_endpoint(api, ApiOptions(project=project))
    with pytest.raises(HandlerLoadError) as caught:
        endpoint.load()
    assert str(caught.value) == (
        "predictor.py: PythonPredictor needs a load_model(self, model_path) method to serve 'multi_model_reloading' "
        "(python_client.get_model calls it for each model version)."
    )


SLOW_LOAD_PREDICTOR = """
import threading

loading, release = threading.Event(), threading.Event()


class PythonPredictor:
    def __init__(self, python_client):
        self.client = python_client

    def load_model(self, model_path):
        if model_path.endswith("slow/1"):
            loading.set()
            release.wait(60)
        return model_path.rsplit("/", 2)[-2]

    def predict(self, query_params):
        return self.client.get_model(query_params["model"])
"""


def test_other_models_answer_while_one_loads(serve, make_project) -> None:
    yaml = (
        "- name: py\n  kind: RealtimeAPI\n  threads_per_process: 2\n  predictor:\n    type: python\n"
        "    path: predictor.py\n    multi_model_reloading: {dir: weights, cache_size: 2, disk_cache_size: 2}\n"
    )
    files = {"cortex.yaml": yaml, "predictor.py": SLOW_LOAD_PREDICTOR}
    files |= {f"weights/{m}/1/w.json": "{}" for m in ("slow", "fast")}
    with serve(make_project(files)) as client:
        import predictor

        slow: list[str] = []
        thread = threading.Thread(target=lambda: slow.append(client.post("/py?model=slow").text))
        thread.start()
        assert predictor.loading.wait(60)  # one API thread is inside load_model("slow")
        assert client.post("/py?model=fast").text == "fast"  # the other loads and answers meanwhile
        predictor.release.set()
        thread.join(60)
    assert slow == ["slow"]
