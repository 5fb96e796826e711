"""An ONNX input whose batch dimension has neither a size nor a name (skl2onnx's default).

The Cortex routes take it as 1, as Cortex's ONNX client did, and say so; GET /<api> shows the same
shape; the V2 routes, with no Cortex precedent, take any size (-1), as Triton does.
"""

from __future__ import annotations

from tests.models import onnx_identity


def test_an_unsized_batch_dimension_is_1_on_cortex_routes_and_free_on_v2(make_project, serve) -> None:
    project = make_project({"localserve.yaml": "- kind: api\n  name: iris\n  model: model.onnx\n"})
    onnx_identity(project / "model.onnx", shape=(None, 4))
    with serve(project) as client:
        described = client.get("/iris").json()["inputs"]
        assert described == [{"name": "x", "type": "float32", "shape": [1, 4], "unsized": [0]}]
        two_rows = client.post("/iris", json=[[1, 2, 3, 4], [5, 6, 7, 8]])
        assert (two_rows.status_code, two_rows.json()["error"]) == (
            400,
            "Input 'x' expects float32 of shape [1, 4]; got a nested list of shape [2, 4]. Dimension 0 has no size "
            "in the model; as on Cortex it is taken as 1 (name it in the model, or send one row).",
        )
        assert client.post("/iris", json=[[1, 2, 3, 4]]).json() == [[[1.0, 2.0, 3.0, 4.0]]]
        assert client.get("/v2/models/iris").json()["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
        tensor = {"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6, 7, 8]}
        answer = client.post("/v2/models/iris/infer", json={"inputs": [tensor]})
        assert answer.status_code == 200
        assert answer.json()["outputs"][0]["shape"] == [2, 4]
