"""What both exports share: the image reference checked before it is written, the project's name as a DNS label,
``api-<name>`` within Kubernetes' 63 characters, the resources of ``compute``, the autoscaler's target, YAML
written without anchors."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.config import ApiConfig, ComputeConfig, PredictorConfig, load_config
from localserve.errors import ConfigError
from localserve.export import kserve_manifests, kubernetes_manifests
from localserve.export.common import (
    api_host_name,
    api_resources,
    dump_all,
    is_v2_model,
    project_name,
    target_concurrency,
)
from tests.export.test_kubernetes import CONFIG, _project


@pytest.mark.parametrize("image", ["x\nmetadata: {name: evil}", "registry.example/iris:1 --privileged", "", "Iris:1"])
def test_an_image_that_is_not_one_reference_is_refused(tmp_path: Path, image: str) -> None:
    config = load_config(_project(tmp_path, CONFIG))
    for export in (kubernetes_manifests, kserve_manifests):
        with pytest.raises(ConfigError) as info:
            export(config, image)
        assert str(info.value) == (
            f"--image {image!r} is not an image reference; expected [REGISTRY/]NAME[:TAG][@DIGEST] on one line, "
            "e.g. registry.example/iris:1."
        )
    digest = "ghcr.io:443/org/iris-onnx@sha256:" + "0" * 64
    for good in ("img", "localhost/iris:ci", "[::1]:5000/a/b_c:v1.2-rc", digest):
        assert f"for image {good}.\n" in kubernetes_manifests(config, good)


def test_the_project_name_is_given_or_made_from_the_folder(tmp_path: Path) -> None:
    project = tmp_path / "__My Project!__"
    project.mkdir()
    config = load_config(_project(project, "- {kind: api, name: a, model: m.onnx}\n"))
    assert project_name(config, None) == "my-project"
    assert project_name(config, "shop") == "shop"
    with pytest.raises(ConfigError) as caught:
        project_name(config, "a" * 41)
    assert str(caught.value).startswith(f"--name {'a' * 41!r} must be a DNS label: ")
    (tmp_path / "___").mkdir()
    unnamed = load_config(_project(tmp_path / "___", "- {kind: api, name: a, model: m.onnx}\n"))
    with pytest.raises(ConfigError) as caught:
        project_name(unnamed, None)
    assert str(caught.value) == "the project folder's name '___' makes no Kubernetes name; pass --name NAME."


def test_api_host_names_fit_a_dns_label() -> None:
    assert api_host_name("API", "a" * 59) == "api-" + "a" * 59
    with pytest.raises(ConfigError) as caught:
        api_host_name("TrafficSplitter", "a" * 60)
    assert str(caught.value) == (
        f"TrafficSplitter name {'a' * 60!r} is too long for Kubernetes: 'api-<name>' must fit in 63 characters, so "
        "the name may have at most 59."
    )


def test_resources_targets_and_which_apis_speak_v2() -> None:
    api = ApiConfig("iris", model="m.onnx", model_format="onnx", compute=ComputeConfig(cpu="1", gpu=1, mem="2Gi"))
    assert api_resources(api) == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"memory": "2Gi", "nvidia.com/gpu": 1},
    }
    assert api_resources(ApiConfig("a", handler="m:h")) == {"requests": {"cpu": "200m"}}
    assert is_v2_model(api) and not is_v2_model(ApiConfig("a", handler="m:h"))
    assert not is_v2_model(ApiConfig("p", predictor=PredictorConfig("onnx", "p.py", "m.onnx")))
    assert target_concurrency(ApiConfig("a", handler="m:h", processes_per_replica=2, threads_per_process=3)) == 6.0
    assert target_concurrency(ApiConfig("a", handler="m:h", target_replica_concurrency=2.5)) == 2.5


def test_yaml_is_written_without_anchors() -> None:
    shared = {"a": 1}
    text = dump_all([{"x": shared, "y": shared}, {"z": [shared]}])
    assert "&" not in text and "*" not in text
    assert text == "x:\n  a: 1\ny:\n  a: 1\n---\nz:\n- a: 1\n"
