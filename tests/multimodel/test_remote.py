"""Remote model folders (moto's S3 server on loopback, a real process): ``paths`` of ``s3://`` prefixes with
version folders, fetched on first use, their downloaded copies trimmed to ``disk_cache_size``."""

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
        events = client.get("/multi").json()["models"]["events"]
    assert [(e["event"], e["model"]) for e in events if "model" in e] == [  # (a remote poll adds "refresh" events)
        ("load", "a"),
        ("load", "b"),
        ("evict", "a"),
        ("load", "c"),
        ("evict", "b"),
        ("disk-evict", "a"),  # a third copy: the least recently used one not in memory goes
        ("load", "a"),  # fetched again
        ("evict", "c"),
        ("disk-evict", "b"),
    ]
