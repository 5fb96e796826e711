"""``localserve export``: Kubernetes manifests from ``compute``, and a ``.dockerignore`` for a project image.

Example::

    config = load_config(Path("iris-classifier"))
    Path("k8s.yaml").write_text(kubernetes_manifests(config, "registry.example/iris:1"))

Each API becomes its own Deployment (serving only that API), a Service named
``api-<name>`` on port 8888, so Cortex-style calls between APIs
(``http://api-<name>:8888/predict``) work unchanged in the cluster, and a
HorizontalPodAutoscaler on CPU utilisation. The API config file is not packaged into the
image (Cortex 0.25-0.33 docs, *Predictors*), so it travels as a ConfigMap mounted at /etc/localserve, as Cortex kept
the config apart from the project files; a change to it rolls the pods.

``kserve_manifests`` writes the same project for KServe: a ServingRuntime and an
InferenceService per API, the V2 ones speaking the Open Inference Protocol.
"""

from __future__ import annotations

from localserve.export.common import PROJECT_DIR
from localserve.export.dockerignore import dockerignore
from localserve.export.kserve import kserve_manifests
from localserve.export.kubernetes import kubernetes_manifests
from localserve.project.ignore import ignored

__all__ = ["PROJECT_DIR", "dockerignore", "ignored", "kserve_manifests", "kubernetes_manifests"]
