"""``localserve export``: Kubernetes manifests from ``compute``, and a ``.dockerignore`` for a project image.

Example::

    config = load_config(Path("iris-classifier"))
    Path("k8s.yaml").write_text(kubernetes_manifests(config, "registry.example/iris:1"))

Each API becomes its own Deployment (serving only that API), a Service named
``api-<name>`` on port 8888, so Cortex-style calls between APIs
(``http://api-<name>:8888/predict``) work unchanged in the cluster, and a
HorizontalPodAutoscaler on CPU utilisation. The API config file is not packaged into the
image (seed 001), so it travels as a ConfigMap mounted at /etc/localserve, as Cortex kept
the config apart from the project files; a change to it rolls the pods.

``kserve_manifests`` writes the same project for KServe: a ServingRuntime and an
InferenceService per API, the V2 ones speaking the Open Inference Protocol.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from localserve.config import ApiConfig, ServeConfig
from localserve.errors import ConfigError
from localserve.ignore import builtin_patterns, ignored, parse_ignore_lines, user_patterns
from localserve.protocols.asyncapi.kubernetes import async_container_settings

__all__ = ["PROJECT_DIR", "dockerignore", "ignored", "kserve_manifests", "kubernetes_manifests"]

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
PROBE_TIMEOUT = 5  # seconds: a model server busy with a batch answers late; Kubernetes' default is 1
_DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


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


def _metadata(name: str, namespace: str | None, labels: dict[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = labels
    return metadata


def config_map_name(instance: str) -> str:
    return f"{instance}-config"


def kubernetes_manifests(
    config: ServeConfig,
    image: str,
    *,
    graceful_timeout: float = 30.0,
    port: int = 8888,
    config_file: Path | None = None,
    name: str | None = None,
    namespace: str | None = None,
    keda_prometheus: str | None = None,
) -> str:
    """Multi-document YAML: the config as a ConfigMap, then a Deployment, a Service and an autoscaler per API.

    The autoscaler is a HorizontalPodAutoscaler on CPU, or, given ``keda_prometheus`` (the URL of
    the Prometheus server that scrapes the pods), a KEDA ScaledObject that keeps the requests in
    flight per replica at ``target_replica_concurrency``, as Cortex scaled (AsyncAPIs keep the HPA).

    ``config_file`` is the file ``config`` was read from (default: ``config.source`` in the project);
    ``name`` (default: the project folder's) names the ConfigMap and labels every object,
    ``namespace`` is written into each.
    """
    import yaml  # pyyaml costs ~20 ms; only export needs it here

    path = config_file if config_file is not None else config.project / config.source
    if config.source == "command line" or not path.is_file():
        raise ConfigError(
            "export kubernetes needs the API config file (localserve.yaml or cortex.yaml) to ship as a ConfigMap; "
            "write one (e.g. '- {kind: api, name: my-api, handler: main:handler}') or pass --config FILE."
        )
    instance = project_name(config, name)
    text = path.read_text(encoding="utf-8")
    checksum = hashlib.sha256(text.encode()).hexdigest()
    documents: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(
                config_map_name(instance), namespace, {APP_LABEL: "localserve", INSTANCE_LABEL: instance}
            ),
            "data": {path.name: text},
        }
    ]
    for api in config.apis:
        deployment = _deployment(api, image, graceful_timeout, port, path.name, checksum, instance, namespace)
        scaler = _autoscaler(api, instance, namespace)
        if keda_prometheus is not None and not api.is_async:
            scaler = _scaled_object(api, instance, namespace, keda_prometheus)
            # The Prometheus that KEDA asks must scrape the pods.
            deployment["spec"]["template"]["metadata"]["annotations"].update(
                {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}
            )
        documents += [deployment, _service(api, port, instance, namespace), scaler]
    header = (
        f"# Generated by `localserve export kubernetes` from {path.name} for image {image}.\n"
        f"# Each API is a Deployment and a Service; APIs call each other at http://api-<name>:{port}/predict.\n"
    )
    return header + yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False)


def resource_name(api: ApiConfig) -> str:
    """``api-<name>``: the Service's DNS name, also used for the Deployment and the autoscaler."""
    name = f"api-{api.name}"
    if len(name) > 63:
        raise ConfigError(
            f"API name {api.name!r} is too long for Kubernetes: 'api-<name>' must fit in 63 characters, "
            "so the name may have at most 59."
        )
    return name


def _labels(api: ApiConfig, instance: str) -> dict[str, str]:
    return {APP_LABEL: "localserve", INSTANCE_LABEL: instance, API_LABEL: api.name}


def _deployment(
    api: ApiConfig,
    image: str,
    graceful_timeout: float,
    port: int,
    config_name: str,
    checksum: str,
    instance: str,
    namespace: str | None,
) -> dict[str, Any]:
    resources = _resources(api)
    container: dict[str, Any] = {
        "name": "localserve",
        "image": image,
        "args": [
            *serve_args(config_name, api.name, port),
            "--graceful-timeout",
            f"{graceful_timeout:g}",
        ],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": [{"name": "LOCALSERVE_CACHE_DIR", "value": CACHE_DIR}],
        "resources": resources,
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 5,
            "timeoutSeconds": PROBE_TIMEOUT,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "periodSeconds": 10,
            "timeoutSeconds": PROBE_TIMEOUT,
            "failureThreshold": 3,
        },
        "lifecycle": {
            "preStop": {"exec": {"command": ["python", "-c", f"import time; time.sleep({PRESTOP_SECONDS})"]}}
        },
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": _volume_mounts(),
    }
    args, env = async_container_settings(api)  # an AsyncAPI's shared job store
    container["args"] += args
    container["env"] += env
    labels = _labels(api, instance)
    pod: dict[str, Any] = {
        "terminationGracePeriodSeconds": int(graceful_timeout + PRESTOP_SECONDS + 0.999),
        "securityContext": POD_SECURITY,
        "containers": [container],
        "volumes": _volumes(instance),
    }
    if api.compute.gpu > 0:
        pod["tolerations"] = [GPU_TOLERATION]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(resource_name(api), namespace, labels),
        "spec": {
            "replicas": api.compute.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {"localserve.dev/config-sha256": checksum}},
                "spec": pod,
            },
        },
    }


def _service(api: ApiConfig, port: int, instance: str, namespace: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(resource_name(api), namespace, _labels(api, instance)),
        "spec": {
            "selector": _labels(api, instance),
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _autoscaler(api: ApiConfig, instance: str, namespace: str | None) -> dict[str, Any]:
    compute = api.compute
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(resource_name(api), namespace, _labels(api, instance)),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": resource_name(api)},
            "minReplicas": compute.min_replicas,
            "maxReplicas": compute.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": compute.target_cpu_utilization},
                    },
                }
            ],
        },
    }


def target_concurrency(api: ApiConfig) -> float:
    """Requests in flight per replica that autoscaling aims at: Cortex's ``target_replica_concurrency``,
    by default (as Cortex) ``processes_per_replica`` times ``threads_per_process``."""
    if api.target_replica_concurrency is not None:
        return api.target_replica_concurrency
    return float(api.processes_per_replica * api.threads_per_process)


def _scaled_object(api: ApiConfig, instance: str, namespace: str | None, prometheus: str) -> dict[str, Any]:
    """A KEDA ScaledObject: replicas = ceil(requests in flight, summed over the pods / the target per replica)."""
    compute = api.compute
    selector = f'api="{api.name}"' + (f',namespace="{namespace}"' if namespace else "")
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _metadata(resource_name(api), namespace, _labels(api, instance)),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": resource_name(api)},
            "minReplicaCount": compute.min_replicas,
            "maxReplicaCount": compute.max_replicas,
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": prometheus,
                        "query": f"sum(localserve_requests_in_flight{{{selector}}})",
                        "threshold": f"{target_concurrency(api):g}",
                    },
                }
            ],
        },
    }


def dockerignore(project: Path, config_file: Path | None) -> str:
    """The lines of a ``.dockerignore`` leaving out what seed 001 does not package, plus the ignore files' lines.

    gitignore patterns are rewritten for Docker, whose patterns are all anchored at the build
    context: ``*.pyc`` becomes ``**/*.pyc``, ``/build`` becomes ``build``. Docker has no
    folder-only patterns, so ``logs/`` also leaves out a file named ``logs``.
    """
    lines = ["# Generated by `localserve export dockerignore`: what the platform does not package."]
    lines += [_docker_pattern(rule_line) for rule_line in builtin_patterns(project, config_file)]
    extra = user_patterns(project)
    if extra:
        lines.append("# From .cortexignore / .localserveignore")
        lines += [_docker_pattern(rule_line) for rule_line in extra if parse_ignore_lines([rule_line])]
    return "\n".join(lines) + "\n"


def _docker_pattern(line: str) -> str:
    (rule,) = parse_ignore_lines([line])
    body = rule.pattern.lstrip("/")
    if not rule.anchored and not body.startswith("**/"):
        body = f"**/{body}"
    body = body.replace("[!", "[^")
    return ("!" if rule.negated else "") + body


# ---------------------------------------------------------------------------------------------
# KServe

KSERVE_PORT = 8080  # the port KServe sends a predictor's traffic to (and scrapes, with the annotations below)
KSERVE_FORMAT = "localserve"  # the model format that the ServingRuntime (named after the project) supports
KSERVE_MODELS = "/mnt/models"  # where KServe's storage initializer puts what storageUri names
_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def kserve_manifests(
    config: ServeConfig,
    image: str,
    *,
    config_file: Path | None = None,
    name: str | None = None,
    namespace: str | None = None,
) -> str:
    """Multi-document YAML for KServe: the config as a ConfigMap, a ServingRuntime, an InferenceService per API.

    An API whose model localserve runs itself (a Cortex API with an ONNX or TensorFlow model) is a
    V2 model: its InferenceService names the ``localserve`` ServingRuntime with ``protocolVersion:
    v2``, and an ``s3://`` model becomes its ``storageUri``, which KServe downloads to /mnt/models
    (the config in the ConfigMap points there). Other APIs (ABEJA handlers, predictors) have no
    tensor interface: their InferenceService runs the same image as a custom container and answers
    at the API's own route. ``name`` (default: the project folder's) names the ServingRuntime and
    the ConfigMap, ``namespace`` is written into each object.
    """
    import yaml

    path = config_file if config_file is not None else config.project / config.source
    if config.source == "command line" or not path.is_file():
        raise ConfigError(
            "export kserve needs the API config file (localserve.yaml or cortex.yaml) to ship as a ConfigMap; "
            "write one (e.g. '- {kind: api, name: my-api, model: model.onnx}') or pass --config FILE."
        )
    for api in config.apis:
        if not _DNS_1035.fullmatch(api.name) or len(api.name) > 63:
            raise ConfigError(
                f"API name {api.name!r} cannot name an InferenceService: KServe needs a DNS-1035 label (lower-case "
                "letters, digits and '-', starting with a letter, ending with a letter or digit, at most 63 "
                "characters)."
            )
    text = path.read_text(encoding="utf-8")
    moved = {api.model: kserve_model_path(api) for api in config.apis if _storage_uri(api) is not None}
    if moved:
        text = yaml.safe_dump(_replace_strings(yaml.safe_load(text), moved), sort_keys=False)
    config_name = path.name
    instance = project_name(config, name)
    documents: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(
                config_map_name(instance), namespace, {APP_LABEL: "localserve", INSTANCE_LABEL: instance}
            ),
            "data": {config_name: text},
        },
        _serving_runtime(image, config_name, instance, namespace),
    ]
    documents += [_inference_service(api, image, config_name, instance, namespace) for api in config.apis]
    header = (
        f"# Generated by `localserve export kserve` from {path.name} for image {image}.\n"
        "# APIs with an ONNX or TensorFlow model speak the Open Inference Protocol (V2) at /v2/models/<api>/infer;\n"
        "# the others answer at their own route. s3:// models are fetched by KServe (storageUri -> /mnt/models).\n"
    )
    return header + yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False)


def is_v2_model(api: ApiConfig) -> bool:
    """Whether localserve serves ``api`` over the Open Inference Protocol (the engine runs its model)."""
    return api.kind == "request_handler" and api.model_format in ("onnx", "tensorflow")


def kserve_model_path(api: ApiConfig) -> str:
    """Where an API's ``s3://`` model lies once KServe's storage initializer has fetched it."""
    assert api.model is not None
    name = api.model.rstrip("/").rsplit("/", 1)[-1]
    if api.model_format == "tensorflow" and not name.lower().endswith(".zip"):
        return KSERVE_MODELS  # a SavedModel folder: its files land in /mnt/models itself
    return f"{KSERVE_MODELS}/{name}"


def _storage_uri(api: ApiConfig) -> str | None:
    if is_v2_model(api) and api.model is not None and api.model.startswith("s3://"):
        return api.model
    return None


def _replace_strings(value: Any, replacements: dict[str | None, str]) -> Any:
    if isinstance(value, dict):
        return {k: _replace_strings(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_strings(v, replacements) for v in value]
    if isinstance(value, str) and value in replacements:
        return replacements[value]
    return value


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


def _container(image: str, args: list[str], ready: str, live: str) -> dict[str, Any]:
    return {
        "name": "kserve-container",
        "image": image,
        "args": args,
        "ports": [{"containerPort": KSERVE_PORT, "protocol": "TCP"}],
        "env": [{"name": "LOCALSERVE_CACHE_DIR", "value": CACHE_DIR}],
        "readinessProbe": _probe(ready, 5),
        "livenessProbe": _probe(live, 10),
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": _volume_mounts(),
    }


def _volume_mounts() -> list[dict[str, Any]]:
    return [
        {"name": "cache", "mountPath": CACHE_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
    ]


def _volumes(instance: str) -> list[dict[str, Any]]:
    return [
        {"name": "cache", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
        {"name": "config", "configMap": {"name": config_map_name(instance)}},
    ]


def _serving_runtime(image: str, config_name: str, instance: str, namespace: str | None) -> dict[str, Any]:
    """One runtime for every V2 API: KServe puts the InferenceService's name (the API's) in ``{{.Name}}``."""
    container = _container(
        image, serve_args(config_name, "{{.Name}}", KSERVE_PORT), "/v2/health/ready", "/v2/health/live"
    )
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": _metadata(instance, namespace, {APP_LABEL: "localserve", INSTANCE_LABEL: instance}),
        "spec": {
            "annotations": {"prometheus.kserve.io/port": str(KSERVE_PORT), "prometheus.kserve.io/path": "/metrics"},
            "supportedModelFormats": [{"name": KSERVE_FORMAT, "version": "1", "autoSelect": True}],
            "protocolVersions": ["v2"],
            "containers": [container],
            "volumes": _volumes(instance),
        },
    }


def _resources(api: ApiConfig) -> dict[str, Any]:
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


def _inference_service(
    api: ApiConfig, image: str, config_name: str, instance: str, namespace: str | None
) -> dict[str, Any]:
    compute = api.compute
    predictor: dict[str, Any] = {
        "minReplicas": compute.min_replicas,
        "maxReplicas": compute.max_replicas,
        "scaleMetric": "cpu",
        "scaleTarget": compute.target_cpu_utilization,
        "timeout": max(1, int(api.timeout + 0.999)),
    }
    if is_v2_model(api):
        model: dict[str, Any] = {
            "modelFormat": {"name": KSERVE_FORMAT, "version": "1"},
            "runtime": instance,
            "protocolVersion": "v2",
            "resources": _resources(api),
        }
        uri = _storage_uri(api)
        if uri is not None:
            model["storageUri"] = uri
        predictor["model"] = model
    else:
        container = _container(image, serve_args(config_name, api.name, KSERVE_PORT), "/readyz", "/healthz")
        container["resources"] = _resources(api)
        predictor["containers"] = [container]
        predictor["volumes"] = _volumes(instance)
    # The pod's settings live in the predictor (a ServingRuntime has no pod securityContext).
    predictor["securityContext"] = POD_SECURITY
    if compute.gpu > 0:
        predictor["tolerations"] = [GPU_TOLERATION]
    metadata = _metadata(api.name, namespace, _labels(api, instance))
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            **metadata,
            "annotations": {
                "serving.kserve.io/enable-prometheus-scraping": "true",
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(KSERVE_PORT),
                "prometheus.io/path": "/metrics",
            },
        },
        "spec": {"predictor": predictor},
    }
