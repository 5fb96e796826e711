"""An AsyncAPI in ``export kubernetes``: a front and workers sharing the store, the workers scaled on the queue
(KEDA), a store the pods cannot share refused."""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from localserve.cli import main
from tests import pod_security
from tests.conftest import EXAMPLES
from tests.export.test_kubernetes import K8S_VERSION, KEDA_REDIS_KEYS, validate_keda


def _export(*extra: str) -> list[dict[str, Any]]:
    project = str(EXAMPLES / "async_words")
    args = ["export", "kubernetes", "--project", project, "--image", "registry.example/words:1", *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.stdout))
    for doc in documents:
        if doc["kind"] == "ScaledObject":
            validate_keda(doc)
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        if doc["kind"] == "Deployment":  # the front and the workers alike
            template = doc["spec"]["template"]
            assert pod_security.violations(template["spec"], template["metadata"].get("annotations")) == []
    return documents


def test_export_kubernetes_makes_a_front_and_workers_sharing_the_store() -> None:
    documents = _export("--async-store", "redis://redis.jobs:6379/0")
    kinds = [(d["kind"], d["metadata"]["name"]) for d in documents]
    assert kinds == [
        ("ConfigMap", "async-words-config"),
        *[("Deployment", "api-words"), ("Service", "api-words"), ("HorizontalPodAutoscaler", "api-words")],
        *[("Deployment", "api-words-worker"), ("HorizontalPodAutoscaler", "api-words-worker")],
    ]
    front, service, front_hpa, worker, worker_hpa = documents[1:]
    (front_container,) = front["spec"]["template"]["spec"]["containers"]
    (worker_container,) = worker["spec"]["template"]["spec"]["containers"]
    for container in (front_container, worker_container):  # both reach the one store, under the project's name
        store = {"name": "LOCALSERVE_ASYNC_STORE", "value": "redis://redis.jobs:6379/0?project=async-words"}
        assert store in container["env"]
        assert container["args"][container["args"].index("--async-store") + 1] == "$(LOCALSERVE_ASYNC_STORE)"
    assert front_container["args"][-1] == "--no-async-workers" and "--no-async-workers" not in worker_container["args"]
    assert front_container["resources"] == {"requests": {"cpu": "250m"}}  # no model there
    # The Service reaches the fronts only; each Deployment selects its own pods.
    assert service["spec"]["selector"] == front["spec"]["selector"]["matchLabels"]
    assert front["spec"]["selector"]["matchLabels"]["localserve.dev/role"] == "front"
    assert worker["spec"]["selector"]["matchLabels"]["localserve.dev/role"] == "worker"
    assert worker["spec"]["template"]["metadata"]["labels"] == worker["spec"]["selector"]["matchLabels"]
    assert worker_hpa["spec"]["scaleTargetRef"]["name"] == "api-words-worker"
    # Each scaler is labelled as what it scales.
    assert front_hpa["metadata"]["labels"] == front["metadata"]["labels"]
    assert worker_hpa["metadata"]["labels"] == worker["metadata"]["labels"]


def test_export_kubernetes_keda_scales_the_workers_on_the_queue_to_zero() -> None:
    documents = _export("--async-store", "rediss://:s3cret@redis.jobs:6380/2", "--keda")
    assert [d["kind"] for d in documents][-2:] == ["Deployment", "ScaledObject"]
    worker, scaled = documents[-2:]
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "api-words-worker",
    }
    assert (scaled["spec"]["idleReplicaCount"], scaled["spec"]["minReplicaCount"]) == (0, 1)
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger == {
        "type": "redis",
        "metadata": {
            "address": "redis.jobs:6380",
            "listName": "localserve:async-words:words:queue",  # the project's --name (default: its folder's)
            "listLength": "1",  # target_replica_concurrency: one thread, one process
            "databaseIndex": "2",
            "enableTLS": "true",
            "passwordFromEnv": "LOCALSERVE_REDIS_PASSWORD",
        },
    }
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    assert {"name": "LOCALSERVE_REDIS_PASSWORD", "value": "s3cret"} in container["env"]
    assert set(trigger["metadata"]) <= KEDA_REDIS_KEYS
    # The queue that trigger reads is the one the store fills in a pod (whose project is /mnt/project).
    from localserve.protocols.asyncapi.store import redis_namespace, redis_project

    (url,) = [e["value"] for e in container["env"] if e["name"] == "LOCALSERVE_ASYNC_STORE"]
    assert url == "rediss://:s3cret@redis.jobs:6380/2?project=async-words"
    assert trigger["metadata"]["listName"] == redis_namespace(redis_project(url, "project")[1], "words") + ":queue"


def test_two_projects_sharing_a_redis_scale_on_their_own_queues() -> None:
    """--name goes into the store's keys and KEDA's listName alike: two projects of one API name do not collide."""
    lists = set()
    for name in ("shop", "lab"):
        scaled = _export("--async-store", "redis://redis.jobs:6379/0", "--keda", "--name", name)[-1]
        lists.add(scaled["spec"]["triggers"][0]["metadata"]["listName"])
    assert lists == {"localserve:shop:words:queue", "localserve:lab:words:queue"}


def test_the_keda_schema_really_checks() -> None:
    scaled = _export("--async-store", "redis://r:6379/0", "--keda")[-1]
    misspelt = {**scaled, "spec": {**scaled["spec"], "minReplicas": 1}}
    no_triggers = {**scaled, "spec": {**scaled["spec"], "triggers": []}}
    for bad in (misspelt, no_triggers):
        with pytest.raises(jsonschema.ValidationError):
            validate_keda(bad)


@pytest.mark.parametrize(
    ("extra", "reason"),
    [([], "it has none"), (["--async-store", "sqlite:///var/jobs.db"], "'sqlite:///var/jobs.db' is a file on one pod")],
)
def test_export_kubernetes_refuses_an_asyncapi_without_a_shared_store(extra: list[str], reason: str) -> None:
    args = ["export", "kubernetes", "--project", str(EXAMPLES / "async_words"), "--image", "w:1", *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: api 'words' is 'kind: AsyncAPI': its pods need a job store they share, but {reason}; pass "
        "--async-store redis://HOST:PORT/DB (or set 'async_store' in the config).\n"
    )
