"""What the manifests of every target share: names, labels, the pod's container, probes, volumes, resources."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from localserve.config import ApiConfig, ServeConfig
from localserve.errors import ConfigError

PROJECT_DIR = "/mnt/project"
CONFIG_DIR = "/etc/localserve"
CACHE_DIR = "/var/cache/localserve"
APP_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"  # the project (--name): two projects share a namespace
API_LABEL = "localserve.dev/api"
PRESTOP_SECONDS = 5  # endpoints controllers need a moment to stop routing to a terminating pod
IMAGE_UID = 10001  # the Dockerfile's user `localserve`

# Pod Security Standards, "restricted": non-root, no privilege escalation, every capability
# dropped, the runtime's default seccomp profile; a read-only root with emptyDirs where
# localserve writes (its cache, and /tmp for the packaged view and temporary files).
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": IMAGE_UID,
    "runAsGroup": IMAGE_UID,
    "fsGroup": IMAGE_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
}


# The taint that GPU node pools carry (GKE, AKS, EKS's NVIDIA AMIs, the GPU operator's docs).
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GRPC_PORT = 8081  # the Open Inference Protocol over gRPC: KServe's port, and the image's LOCALSERVE_GRPC_PORT
PROBE_TIMEOUT = 5  # seconds: a model server busy with a batch answers late; Kubernetes' default is 1
_DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


# An image reference as `docker pull` reads it (the grammar of distribution/reference):
# [HOST[:PORT]/]PATH[:TAG][@ALGORITHM:HEX], on one line.
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH}(?:/{_PATH})*(?::\w[\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


def check_image(image: str) -> None:
    """A ConfigError unless ``image`` is one image reference: it is written into the manifests and their header."""
    if not _IMAGE.fullmatch(image) or len(image) > 255:
        raise ConfigError(
            f"--image {image!r} is not an image reference; expected [REGISTRY/]NAME[:TAG][@DIGEST] on one line, "
            "e.g. registry.example/iris:1."
        )


def missing_config(command: str, project: Path) -> ConfigError:
    """The error of an export from a project without a config file (an ABEJA project served with --handler)."""
    return ConfigError(
        f"export {command} ships the API config file as a ConfigMap, and {project} has none (localserve.yaml or "
        "cortex.yaml); write one, e.g. for an ABEJA handler a localserve.yaml holding "
        "'- {kind: api, name: my-api, handler: main:handler}', or pass --config FILE."
    )


def is_v2_model(api: ApiConfig) -> bool:
    """Whether localserve serves ``api`` over the Open Inference Protocol (the engine runs its model)."""
    return api.kind == "request_handler" and api.model_format in ("onnx", "tensorflow")


def project_name(config: ServeConfig, name: str | None) -> str:
    """``--name``, or the project folder's name made a DNS label: what every object's name carries."""
    if name is not None:
        if not _DNS_1123.fullmatch(name) or len(name) > 40:
            raise ConfigError(
                f"--name {name!r} must be a DNS label: lower-case letters, digits and '-', starting and ending "
                "with a letter or digit, at most 40 characters (object names add to it)."
            )
        return name
    derived = re.sub(r"[^a-z0-9-]+", "-", config.project.resolve().name.lower()).strip("-")[:40].strip("-")
    if not derived:
        raise ConfigError(
            f"the project folder's name {config.project.resolve().name!r} makes no Kubernetes name; pass --name NAME."
        )
    return derived


def object_metadata(name: str, namespace: str | None, labels: dict[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = labels
    return metadata


def config_map(instance: str, namespace: str | None, data: dict[str, str]) -> dict[str, Any]:
    """The ConfigMap ``<instance>-config`` that ships the API config to the pods."""
    labels = {APP_LABEL: "localserve", INSTANCE_LABEL: instance}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_metadata(config_map_name(instance), namespace, labels),
        "data": data,
    }


def config_map_name(instance: str) -> str:
    return f"{instance}-config"


def resource_name(api: ApiConfig) -> str:
    """``api-<name>``: the Service's DNS name, also used for the Deployment and the autoscaler."""
    return api_host_name("API", api.name)


def api_host_name(kind: str, name: str) -> str:
    """``api-<name>``, the host callers use (Cortex's), for an API or a TrafficSplitter (``kind``): a DNS label."""
    host = f"api-{name}"
    if len(host) > 63:
        raise ConfigError(
            f"{kind} name {name!r} is too long for Kubernetes: 'api-<name>' must fit in 63 characters, "
            "so the name may have at most 59."
        )
    return host


def api_labels(api: ApiConfig, instance: str) -> dict[str, str]:
    return {APP_LABEL: "localserve", INSTANCE_LABEL: instance, API_LABEL: api.name}


KSERVE_PORT = 8080  # the port KServe sends a predictor's traffic to (and scrapes, with the annotations below)
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def serve_args(config_name: str, api: str, port: int) -> list[str]:
    """The container's ``localserve serve`` arguments for one API (Kubernetes and KServe alike)."""
    return [
        "serve",
        "--project",
        PROJECT_DIR,
        "--config",
        f"{CONFIG_DIR}/{config_name}",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--api",
        api,
        "--replicas",
        "1",  # the cluster scales pods; each pod runs one replica
        "--hide-errors",  # a cluster's clients see request ids, the pod log the errors
    ]


def _probe(path: str, period: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": KSERVE_PORT},
        "periodSeconds": period,
        "timeoutSeconds": PROBE_TIMEOUT,
        "failureThreshold": 3,
    }


def model_container(image: str, args: list[str], ready: str, live: str) -> dict[str, Any]:
    return {
        "name": "kserve-container",
        "image": image,
        "args": args,
        "ports": [{"containerPort": KSERVE_PORT, "protocol": "TCP"}],
        "env": [{"name": "LOCALSERVE_CACHE_DIR", "value": CACHE_DIR}],
        "readinessProbe": _probe(ready, 5),
        "livenessProbe": _probe(live, 10),
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": pod_volume_mounts(),
    }


def pod_volume_mounts() -> list[dict[str, Any]]:
    return [
        {"name": "cache", "mountPath": CACHE_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
    ]


def pod_volumes(instance: str) -> list[dict[str, Any]]:
    return [
        {"name": "cache", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
        {"name": "config", "configMap": {"name": config_map_name(instance)}},
    ]


def target_concurrency(api: ApiConfig) -> float:
    """Requests in flight per replica that autoscaling aims at: Cortex's ``target_replica_concurrency``,
    by default (as Cortex) ``processes_per_replica`` times ``threads_per_process``."""
    if api.target_replica_concurrency is not None:
        return api.target_replica_concurrency
    return float(api.processes_per_replica * api.threads_per_process)


def api_resources(api: ApiConfig) -> dict[str, Any]:
    """``compute``: cpu requested; mem requested and the limit (a pod over it is killed, not the node);
    GPUs are a limit (Kubernetes sets the request to match)."""
    compute = api.compute
    requests: dict[str, Any] = {"cpu": compute.cpu}
    limits: dict[str, Any] = {}
    if compute.mem is not None:
        requests["memory"] = compute.mem
        limits["memory"] = compute.mem
    if compute.gpu > 0:
        limits["nvidia.com/gpu"] = compute.gpu
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return resources


def dump_all(documents: list[dict[str, Any]]) -> str:
    """The documents as YAML, each object written out in full: no anchors and aliases for shared dicts
    (``&id001``/``*id001``), which some tools of the cluster's (kustomize, older kubectl diffs) refuse."""
    import yaml  # pyyaml is slow to import; only export needs it

    class Plain(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return yaml.dump_all(documents, Dumper=Plain, sort_keys=False, default_flow_style=False)
