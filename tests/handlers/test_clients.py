"""The clients a Cortex predictor gets (``onnx_client``, ``tensorflow_client``): how they take a model's name,
its version and a signature key."""

from __future__ import annotations

from tests.multimodel.helpers import X, add_version, expected

POSITIONAL_PREDICTOR = """
class ONNXPredictor:
    def __init__(self, onnx_client):
        self.client = onnx_client

    def predict(self, payload):
        by_name = self.client.predict(payload, "resnet")  # Cortex's model_name, second: never a signature key
        by_version = self.client.predict(payload, "resnet", "latest")
        try:
            self.client.predict(payload, "resnet", 1, "serving_default")
        except TypeError as exc:
            refused = str(exc)
        return {"logits": [by_name[1].tolist(), by_version[1].tolist()], "refused": refused}
"""


def test_the_clients_take_the_model_positionally_and_signature_key_by_keyword_only(serve, make_project) -> None:
    import inspect

    from localserve.handlers.clients import ModelClient, MultiModelClient

    for client_class in (ModelClient, MultiModelClient):  # onnx_client and tensorflow_client alike
        parameters = inspect.signature(client_class.predict).parameters
        assert [(p.name, p.kind.name, p.default) for p in list(parameters.values())[1:]] == [
            ("model_input", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
            ("model_name", "POSITIONAL_OR_KEYWORD", None),
            ("model_version", "POSITIONAL_OR_KEYWORD", "highest"),
            ("signature_key", "KEYWORD_ONLY", None),
        ]
    yaml = "- name: one\n  kind: RealtimeAPI\n  predictor:\n    type: onnx\n    path: predictor.py\n"
    project = make_project(
        {"cortex.yaml": yaml + "    models: {path: model.onnx}\n", "predictor.py": POSITIONAL_PREDICTOR}
    )
    add_version(project / "m", "a", 1).rename(project / "model.onnx")
    with serve(project) as client:
        response = client.post("/one", json=X)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "logits": [expected("a", 1), expected("a", 1)],  # one model: the name is not needed, nor refused
        "refused": "ModelClient.predict() takes from 2 to 4 positional arguments but 5 were given",
    }
