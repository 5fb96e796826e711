"""Live reloading of a multi-model API's models (the watch of its folders): a version folder dropped in, a
model file replaced, a version removed, all while requests run; each step is awaited on the model set's own
refresh event (never a sleep)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

from tests.models import onnx_linear
from tests.multimodel.helpers import ONNX_PREDICTOR, X, add_version, bias_of, expected, models_dir, project_yaml


def wait_for_change(models: Any, seen: int, change: dict[str, Any]) -> int:
    """Wait on the model set's event until a refresh after ``seen`` reported ``change``; the generation then."""
    with models.changed:
        assert models.changed.wait_for(
            lambda: (
                models.generation > seen
                and any(change in e.get("changes", ()) for e in list(models.events) if e["event"] == "refresh")
            ),
            timeout=60,
        ), list(models.events)
        return int(models.generation)


class Traffic:
    """Requests to model ``a`` in a loop on a thread, each status and answer kept, until stopped."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.answers: list[tuple[int, Any]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            response = self.client.post("/multi?model=a", json=X)
            self.answers.append((response.status_code, response.json()))

    def end(self) -> list[tuple[int, Any]]:
        self.stop.set()
        self.thread.join(60)
        return self.answers


def test_versions_appear_change_and_leave_while_serving(serve, make_project, tmp_path: Path) -> None:
    project = make_project({"cortex.yaml": project_yaml("      dir: models\n"), "predictor.py": ONNX_PREDICTOR})
    root = models_dir(project / "models", {"a": [1], "b": [1]})
    staging = tmp_path / "staging"
    with serve(project) as client:
        models = client.app.apis["multi"].endpoint.models
        traffic = Traffic(client)
        seen = models.generation
        add_version(staging, "a", 2)  # built elsewhere, then renamed in whole
        os.rename(staging / "a" / "2", root / "a" / "2")
        seen = wait_for_change(models, seen, {"model": "a", "version": 2, "change": "added"})
        assert client.post("/multi?model=a", json=X).json() == {"logits": expected("a", 2)}

        replaced = onnx_linear(staging / "new.onnx", bias=[b + 10 for b in bias_of("a", 2)])
        os.replace(replaced, root / "a" / "2" / "model.onnx")
        seen = wait_for_change(models, seen, {"model": "a", "version": 2, "change": "replaced"})
        ten = [[v + 10 for v in row] for row in expected("a", 2)]
        assert client.post("/multi?model=a", json=X).json() == {"logits": ten}

        shutil.rmtree(root / "a" / "2")
        wait_for_change(models, seen, {"model": "a", "version": 2, "change": "removed"})
        assert client.post("/multi?model=a", json=X).json() == {"logits": expected("a", 1)}
        answers = traffic.end()
        events = [(e["event"], e["model"], e["version"], e.get("reason")) for e in models.events if "model" in e]
    assert {status for status, _ in answers} == {200}  # no failed request in between
    kinds = [body["logits"] for _, body in answers]
    assert set(map(str, kinds)) <= {str(expected("a", 1)), str(expected("a", 2)), str(ten)}
    assert ("evict", "a", 2, "replaced") in events and ("evict", "a", 2, "removed") in events


PYTHON_PREDICTOR = """
import json
import threading

started, release = threading.Event(), threading.Event()


class PythonPredictor:
    def __init__(self, python_client, config):
        self.client = python_client

    def load_model(self, model_path):
        with open(model_path + "/weights.json") as f:
            return json.load(f)

    def predict(self, payload):
        model = self.client.get_model("m")
        if payload == "hold":
            started.set()
            release.wait(60)
        return model["scale"]
"""


def test_a_request_in_flight_finishes_on_the_model_it_started_with(serve, make_project, tmp_path: Path) -> None:
    yaml = (
        "- name: py\n  kind: RealtimeAPI\n  threads_per_process: 2\n  predictor:\n    type: python\n"
        "    path: predictor.py\n    multi_model_reloading: {dir: weights}\n"
    )
    project = make_project({"cortex.yaml": yaml, "predictor.py": PYTHON_PREDICTOR, "weights/m/1/weights.json": "1"})
    (project / "weights" / "m" / "1" / "weights.json").write_text('{"scale": 1}')
    staging = tmp_path / "v2"
    staging.mkdir()
    (staging / "weights.json").write_text('{"scale": 2}')
    with serve(project) as client:
        import predictor

        models = client.app.apis["py"].endpoint.models
        result: list[Any] = []
        held = threading.Thread(target=lambda: result.append(client.post("/py", json="hold").json()))
        held.start()
        assert predictor.started.wait(60)
        seen = models.generation
        os.rename(staging, project / "weights" / "m" / "2")
        wait_for_change(models, seen, {"model": "m", "version": 2, "change": "added"})
        assert client.post("/py", json="go").json() == 2  # the next request runs the new version
        predictor.release.set()
        held.join(60)
    assert result == [1]  # the one in flight finished on version 1


def test_one_model_path_with_version_folders_serves_the_highest_and_picks_up_new_ones(
    serve, make_project, tmp_path: Path
) -> None:
    project = make_project({"cortex.yaml": project_yaml("      path: models/a\n"), "predictor.py": ONNX_PREDICTOR})
    root = models_dir(project / "models", {"a": [1, 3]})
    with serve(project) as client:
        models = client.app.apis["multi"].endpoint.models
        assert client.post("/multi", json=X).json() == {"logits": expected("a", 3)}  # no name needed: one model
        assert client.post("/multi?version=1", json=X).json() == {"logits": expected("a", 1)}
        seen = models.generation
        add_version(tmp_path / "staging", "a", 7)
        os.rename(tmp_path / "staging" / "a" / "7", root / "a" / "7")
        wait_for_change(models, seen, {"model": "_cortex_default", "version": 7, "change": "added"})
        assert client.post("/multi", json=X).json() == {"logits": expected("a", 7)}


def test_the_folder_watch_is_one_of_the_threads_shutdown_waits_for(serve, make_project) -> None:
    """A change may be loading a model on the watch's thread when the server stops: it is joined like the API's."""
    project = make_project({"cortex.yaml": project_yaml("      dir: models\n"), "predictor.py": ONNX_PREDICTOR})
    models_dir(project / "models", {"a": [1]})
    with serve(project) as client:
        pipeline = client.app.apis["multi"].pipeline
        watch = [thread for thread in pipeline.all_threads() if thread.name == "localserve-models-watch"]
        assert len(watch) == 1 and watch[0].is_alive()
    assert pipeline.join(30) == []  # the watch ended with the rest (watchfiles answers its stop within 1 s)
