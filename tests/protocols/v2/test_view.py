"""V2 describes and answers with the model that runs: after ``serve --reload`` swaps in a model whose outputs come
in another order or whose input has another name, and after a version of a multi-model API is replaced in place."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from tests.models import IR_VERSION, OPSET

CONFIG = """\
- kind: api
  name: m
  model: first.onnx
"""


def two_outputs(path: Path, outputs: Sequence[str], source: str = "x") -> Path:
    """``plus = x + 1`` and ``minus = -x`` of a float input ``source`` [batch, 2], listed in the order ``outputs``."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Add", [source, "one"], ["plus"]), helper.make_node("Neg", [source], ["minus"])]
    specs = {name: helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 2]) for name in ("plus", "minus")}
    graph = helper.make_graph(
        nodes,
        "two_outputs",
        [helper.make_tensor_value_info(source, TensorProto.FLOAT, ["batch", 2])],
        [specs[name] for name in outputs],
        initializer=[one],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.save(model, str(path))
    return path


def infer(client, input_name: str = "x") -> dict[str, list[float]]:
    body = {"inputs": [{"name": input_name, "datatype": "FP32", "shape": [1, 2], "data": [1.0, 2.0]}]}
    response = client.post("/v2/models/m/infer", json=body)
    assert response.status_code == 200, response.text
    return {output["name"]: output["data"] for output in response.json()["outputs"]}


def test_v2_after_a_reload_describes_and_answers_with_the_new_model(serve, make_project) -> None:
    project = make_project({"localserve.yaml": CONFIG})
    two_outputs(project / "first.onnx", ["plus", "minus"])
    two_outputs(project / "swapped.onnx", ["minus", "plus"])
    two_outputs(project / "renamed.onnx", ["plus", "minus"], source="y")
    with serve(project) as client:
        engine = client.app.engine
        rt = engine.apis["m"]
        assert infer(client) == {"plus": [2.0, 3.0], "minus": [-1.0, -2.0]}

        client.portal.call(engine.replace_api, "m", dataclasses.replace(rt.api, model="swapped.onnx"))
        assert [o["name"] for o in client.get("/v2/models/m").json()["outputs"]] == ["minus", "plus"]
        assert infer(client) == {"minus": [-1.0, -2.0], "plus": [2.0, 3.0]}  # each output under its own name

        client.portal.call(engine.replace_api, "m", dataclasses.replace(rt.api, model="renamed.onnx"))
        assert [i["name"] for i in client.get("/v2/models/m").json()["inputs"]] == ["y"]
        assert infer(client, "y") == {"plus": [2.0, 3.0], "minus": [-1.0, -2.0]}
        refused = client.post(
            "/v2/models/m/infer", json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]}]}
        )
        assert refused.status_code == 400 and "'y'" in refused.json()["error"], refused.text


MULTI = """\
- kind: RealtimeAPI
  name: multi
  predictor:
    type: onnx
    path: predictor.py
    models:
      dir: models
"""

PREDICTOR = """\
class ONNXPredictor:
    def __init__(self, onnx_client, config):
        self.client = onnx_client

    def predict(self, payload):
        return self.client.predict(payload, "two")
"""


def test_v2_describes_a_version_replaced_in_place(serve, make_project) -> None:
    project = make_project({"localserve.yaml": MULTI, "predictor.py": PREDICTOR})
    (project / "models" / "two" / "1").mkdir(parents=True)
    model = project / "models" / "two" / "1" / "model.onnx"
    two_outputs(model, ["plus", "minus"])
    with serve(project) as client:
        models = client.app.engine.apis["multi"].endpoint.models
        url = "/v2/models/multi.two"
        assert [o["name"] for o in client.get(url).json()["outputs"]] == ["plus", "minus"]

        replacement = two_outputs(model.with_name("next.onnx"), ["minus", "plus"])
        replacement.replace(model)
        models.refresh()  # what the folders' watcher does when it sees the change
        assert [o["name"] for o in client.get(url).json()["outputs"]] == ["minus", "plus"]
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [1.0, 2.0]}]}
        response = client.post(f"{url}/infer", json=body)
        assert response.status_code == 200, response.text
        answered = {output["name"]: output["data"] for output in response.json()["outputs"]}
        assert answered == {"minus": [-1.0, -2.0], "plus": [2.0, 3.0]}
