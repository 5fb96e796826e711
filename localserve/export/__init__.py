"""``localserve export``: Kubernetes manifests from ``compute``, and a ``.dockerignore`` for a project image.

Example::

    config = load_config(Path("iris-classifier"))
    Path("k8s.yaml").write_text(kubernetes_manifests(config, "registry.example/iris:1"))

``kubernetes``: per API a Deployment, a Service ``api-<name>`` on port 8888 (so Cortex-style calls between APIs work
unchanged) and an autoscaler, the config in a ConfigMap. ``kserve``: a ServingRuntime and an InferenceService per API,
the V2 ones speaking the Open Inference Protocol.
"""

from __future__ import annotations

from localserve.export.common import PROJECT_DIR
from localserve.export.dockerignore import dockerignore
from localserve.export.kserve import kserve_manifests
from localserve.export.kubernetes import kubernetes_manifests
from localserve.project.ignore import ignored

__all__ = ["PROJECT_DIR", "dockerignore", "ignored", "kserve_manifests", "kubernetes_manifests"]
