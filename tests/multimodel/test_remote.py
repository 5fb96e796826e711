"""Remote model folders (moto's S3 server on loopback, a real process): ``paths`` of ``s3://`` prefixes with
version folders, fetched on first use, their downloaded copies trimmed to ``disk_cache_size`` (and kept so by
describing, listing and polling); ``http(s)://`` zips of version folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.multimodel.helpers import ONNX_PREDICTOR, X, expected, models_dir, project_yaml
from tests.runtimes.test_sources import aws_env, bucket, s3_endpoint  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow


def upload(target: Any, root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            target.put_object(Key=path.relative_to(root).as_posix(), Body=path.read_bytes())


def test_s3_models_are_fetched_on_use_and_trimmed_on_disk(serve, make_project, bucket, tmp_path: Path) -> None:  # noqa: F811
    upload(bucket, models_dir(tmp_path / "upload", {"a": [1, 2], "b": [1], "c": [4]}))
    paths = "".join(f"        - {{name: {m}, path: 's3://{bucket.name}/{m}/'}}\n" for m in "abc")
    models = f"      paths:\n{paths}      cache_size: 1\n      disk_cache_size: 2\n"
    project = make_project({"cortex.yaml": project_yaml(models), "predictor.py": ONNX_PREDICTOR})
    with serve(project) as client:
        for model, version in (("a", 2), ("b", 1), ("c", 4), ("a", 2)):
            response = client.post(f"/multi?model={model}", json=X)
            assert response.status_code == 200, response.text
            assert response.json() == {"logits": expected(model, version)}
        models = client.app.apis["multi"].endpoint.models
        copies = tmp_path / "_xdg" / "localserve" / "models"
        assert len(list(copies.glob("s3-*"))) == 2  # a and c; b's copy was deleted
        # Describing the API, listing the V2 models and a remote poll fetch no trimmed copy again.
        assert client.get("/multi").json()["models"]["available"] == {"a": [1, 2], "b": [1], "c": [4]}
        assert [m["name"] for m in client.get("/v2/models").json()] == ["multi.a", "multi.a", "multi.b", "multi.c"]
        assert models.refresh(remote=True) == []
        assert len(list(copies.glob("s3-*"))) == 2
        # A new version of b, uploaded meanwhile: b's next use fetches it, without a poll in between.
        upload(bucket, models_dir(tmp_path / "upload2", {"b": [3]}))
        assert client.post("/multi?model=b", json=X).json() == {"logits": expected("b", 3)}
        assert len(list(copies.glob("s3-*"))) == 2
        events = client.get("/multi").json()["models"]["events"]
    assert [(e["event"], e["model"]) for e in events if "model" in e] == [  # (a remote poll adds "refresh" events)
        ("load", "a"),
        ("load", "b"),
        ("evict", "a"),
        ("disk-evict", "a"),  # c's copy is the third: the least recently used one whose model is not in memory goes
        ("load", "c"),
        ("evict", "b"),
        ("disk-evict", "b"),  # a is fetched again: b's copy goes
        ("load", "a"),
        ("evict", "c"),
        ("disk-evict", "c"),  # b is fetched again (its version 3): c's copy goes
        ("load", "b"),
        ("evict", "a"),
    ]
