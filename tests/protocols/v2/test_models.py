"""Which APIs are V2 models, and the one wording of a lookup that fails, through the real app's APIs."""

from __future__ import annotations

import pytest

from localserve.errors import NotFound
from localserve.protocols.v2.models import V2Models
from tests.server.test_pages import pages_project


def test_only_apis_whose_model_localserve_runs_are_v2_models_and_a_miss_says_why(make_project, serve) -> None:
    with serve(pages_project(make_project)) as client:
        models = V2Models(client.app.apis)
        assert models.names() == ["iris", "two"]  # echo, an ABEJA handler, is none
        rt, model = models.find("iris", "1")
        assert rt.api.name == "iris" and models.find("iris", "latest")[1] is model  # one view per load
        assert models.api_of("iris") is rt and models.where("iris") is None
        assert [(e["name"], e["state"]) for e in models.index()] == [("iris", "READY"), ("two", "READY")]
        misses = {}
        for name, version in (("nope", None), ("echo", None), ("iris", "2")):
            with pytest.raises(NotFound) as caught:
                models.find(name, version)
            misses[name] = str(caught.value)
    assert misses == {
        "nope": "No model 'nope'; the models served over the Open Inference Protocol are: 'iris', 'two'.",
        "echo": "API 'echo' is an ABEJA handler, which takes requests, not tensors; the Open Inference Protocol "
        "serves only APIs whose ONNX or TensorFlow model localserve runs itself. Use its own route (/echo).",
        "iris": "Model 'iris' has no version '2'; localserve serves version 1 only.",
    }
