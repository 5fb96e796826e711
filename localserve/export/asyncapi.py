"""An AsyncAPI in ``export kubernetes``: a front that takes submits and polls, and workers scaled on the queue.

As Cortex ran it (a gateway before workers sized on the queue), with the same image:

- ``api-<name>`` (Deployment, Service, HPA on CPU): ``serve --no-async-workers``, which loads no user code and no model
  (so no GPU) and writes jobs into the shared Redis store and reads their results.
- ``api-<name>-worker`` (Deployment, no Service): ``serve``, running the jobs it claims. With ``--keda``, a KEDA
  ScaledObject on the store's queue (``localserve:<name>:<api>:queue``) sizes it to ``ceil(queued jobs /
  target_replica_concurrency)``, none while nothing is queued; without, an HPA on CPU (GPU workers keep
  ``init_replicas``: their load does not show in CPU).

A worker scaled down mid-job loses nothing: its lease runs out and another worker runs the job again.
"""

from __future__ import annotations

import copy
import math
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from localserve.config import ApiConfig
from localserve.errors import ConfigError
from localserve.export.common import PROJECT_DIR, object_metadata
from localserve.protocols.asyncapi.kubernetes import STORE_ENV
from localserve.protocols.asyncapi.store import redis_namespace, redis_project

ROLE_LABEL = "localserve.dev/role"  # front or worker: the Service selects the fronts only
FRONT_CPU = "250m"  # a front parses, stores and reads jobs: no model, no GPU
PASSWORD_ENV = "LOCALSERVE_REDIS_PASSWORD"  # the store's password, for KEDA's trigger (passwordFromEnv)


def split_async(
    api: ApiConfig,
    deployment: dict[str, Any],
    service: dict[str, Any],
    autoscaler: dict[str, Any],
    *,
    target: float,
    keda: bool,
) -> list[dict[str, Any]]:
    """The front (``deployment`` made a front, ``service``, ``autoscaler``) and the workers with their scaler."""
    worker = copy.deepcopy(deployment)
    front = _with_role(deployment, "front")
    (container,) = front["spec"]["template"]["spec"]["containers"]
    container["args"].append("--no-async-workers")
    container["resources"] = {"requests": {"cpu": FRONT_CPU}}
    front["spec"]["template"]["spec"].pop("tolerations", None)
    front["spec"]["replicas"] = 1
    service["spec"]["selector"] = front["spec"]["selector"]["matchLabels"]
    autoscaler["metadata"]["labels"] = dict(front["metadata"]["labels"])
    autoscaler["spec"]["minReplicas"] = 1

    name = f"{deployment['metadata']['name']}-worker"
    worker = _with_role(worker, "worker", name=name)
    if keda:
        scaler = _redis_scaled_object(api, worker, target)
    elif api.compute.gpu > 0:  # its GPU work does not show in CPU, and jobs are not requests in flight
        return [front, service, autoscaler, worker]
    else:
        scaler = copy.deepcopy(autoscaler)
        scaler["metadata"] = copy.deepcopy(worker["metadata"])
        scaler["spec"]["minReplicas"] = api.compute.min_replicas
        scaler["spec"]["scaleTargetRef"]["name"] = name
    return [front, service, autoscaler, worker, scaler]


def _with_role(deployment: dict[str, Any], role: str, *, name: str | None = None) -> dict[str, Any]:
    labels = {**deployment["metadata"]["labels"], ROLE_LABEL: role}
    deployment["metadata"]["labels"] = labels
    if name is not None:
        deployment["metadata"]["name"] = name
    deployment["spec"]["selector"] = {"matchLabels": labels}
    deployment["spec"]["template"]["metadata"]["labels"] = labels
    return deployment


def _redis_scaled_object(api: ApiConfig, worker: dict[str, Any], target: float) -> dict[str, Any]:
    """KEDA's Redis list trigger on the job queue of ``api``'s store (KEDA's ``redis`` scaler)."""
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    url = next((e["value"] for e in container["env"] if e["name"] == STORE_ENV), "")  # as the pods read it
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ConfigError(
            f"api {api.name!r}: --keda scales its workers on the Redis list of its queue, which needs a "
            f"redis://HOST:PORT/DB store; {api.async_store!r} is not one."
        )
    metadata: dict[str, str] = {
        "address": f"{parts.hostname}:{parts.port or 6379}",
        "listName": f"{redis_namespace(redis_project(url, PurePosixPath(PROJECT_DIR).name)[1], api.name)}:queue",
        "listLength": str(max(1, math.ceil(target))),  # queued jobs per worker replica
        "databaseIndex": (parts.path.strip("/") or "0"),
    }
    if parts.scheme == "rediss":
        metadata["enableTLS"] = "true"
    if parts.password:  # read by KEDA from the worker's own environment
        container["env"].append({"name": PASSWORD_ENV, "value": parts.password})
        metadata["passwordFromEnv"] = PASSWORD_ENV
    compute = api.compute
    meta = worker["metadata"]
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": object_metadata(meta["name"], meta.get("namespace"), meta["labels"]),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"]},
            "idleReplicaCount": 0,  # nothing queued: no worker (KEDA wants it below minReplicaCount)
            "minReplicaCount": max(1, compute.min_replicas),
            "maxReplicaCount": max(1, compute.max_replicas),
            "triggers": [{"type": "redis", "metadata": metadata}],
        },
    }
