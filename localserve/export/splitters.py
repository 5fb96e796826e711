"""TrafficSplitters in the exports: an Istio VirtualService for ``export kubernetes``, a note for ``export kserve``.

As Cortex did (``pkg/lib/k8s/virtual_service.go``): a Service ``api-<splitter>`` without pods and a VirtualService for
it, one weighted route per API's Service, the shadow as ``mirror`` with ``mirrorPercentage``, the request rewritten to
``/predict`` and ``x-localserve-api`` added to the answer. KServe has no routing between InferenceServices
(``canaryTrafficPercent`` splits one's revisions), so ``export kserve`` says so in its header.
"""

from __future__ import annotations

from typing import Any

from localserve.config import ServeConfig, SplitterConfig
from localserve.export.common import APP_LABEL, INSTANCE_LABEL, api_host_name, object_metadata

SPLITTER_LABEL = "localserve.dev/traffic-splitter"
SERVED_BY = "x-localserve-api"  # the header localserve's own splitter adds (protocols/splitter.py)


def splitter_name(splitter: SplitterConfig) -> str:
    """``api-<splitter>``: the name of its Service and VirtualService, the host callers use."""
    return api_host_name("TrafficSplitter", splitter.name)


def splitter_manifests(config: ServeConfig, port: int, instance: str, namespace: str | None) -> list[dict[str, Any]]:
    """A Service and an Istio VirtualService per TrafficSplitter of ``config``."""
    documents: list[dict[str, Any]] = []
    for splitter in config.splitters:
        name = splitter_name(splitter)
        labels = {APP_LABEL: "localserve", INSTANCE_LABEL: instance, SPLITTER_LABEL: splitter.name}
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": object_metadata(name, namespace, labels),
                "spec": {"ports": [{"name": "http", "port": port, "protocol": "TCP"}]},  # no pods: the mesh routes it
            }
        )
        documents.append(
            {
                "apiVersion": "networking.istio.io/v1beta1",
                "kind": "VirtualService",
                "metadata": object_metadata(name, namespace, labels),
                "spec": {"hosts": [name], "http": [_route(splitter, port)]},
            }
        )
    return documents


def splitters_header(config: ServeConfig) -> str:
    """The header line of ``export kubernetes`` when the config has TrafficSplitters."""
    if not config.splitters:
        return ""
    return "# Each TrafficSplitter is a Service and an Istio VirtualService (weights, shadow as mirror).\n"


def _route(splitter: SplitterConfig, port: int) -> dict[str, Any]:
    paths = dict.fromkeys([splitter.endpoint, f"/{splitter.name}", "/predict", f"/{splitter.name}/predict"])
    route: dict[str, Any] = {
        "name": splitter.name,
        "match": [{"uri": {"exact": path}} for path in paths],
        "rewrite": {"uri": "/predict"},  # each API's pod serves that one API at /predict
        "route": [
            {
                "destination": {"host": f"api-{split.name}", "port": {"number": port}},
                "weight": split.weight,
                "headers": {"response": {"set": {SERVED_BY: split.name}}},
            }
            for split in splitter.targets
        ],
    }
    shadow = splitter.shadow
    if shadow is not None:
        route["mirror"] = {"host": f"api-{shadow.name}", "port": {"number": port}}
        route["mirrorPercentage"] = {"value": float(shadow.weight)}
    return route


def kserve_splitter_note(config: ServeConfig) -> str:
    """The header lines of ``export kserve`` for the TrafficSplitters it cannot express."""
    lines = []
    for splitter in config.splitters:
        weights = ", ".join(f"{s.name} {s.weight}%" + (" (shadow)" if s.shadow else "") for s in splitter.apis)
        lines.append(
            f"# TrafficSplitter {splitter.name!r} ({weights}) is not exported: KServe routes only between the "
            "revisions of one InferenceService (canaryTrafficPercent);\n#   route between these InferenceServices "
            "with your ingress, or use `localserve export kubernetes` (an Istio VirtualService).\n"
        )
    return "".join(lines)


def multi_model_note(text: str) -> str:
    """Header lines for the multi-model APIs of a config's text (``predictor.models`` with ``paths`` or ``dir``).

    They travel as written, in the ConfigMap: each pod loads, caches (``cache_size`` and ``disk_cache_size``
    are per pod) and reloads its models itself, from the image or from ``s3://``; nothing here fetches them.
    """
    import yaml

    try:
        entries = yaml.safe_load(text)
    except yaml.YAMLError:
        return ""
    names = [
        str(entry.get("name"))
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("predictor"), dict) and _many_models(entry["predictor"])
    ]
    if not names:
        return ""
    return (
        f"# Multi-model APIs ({', '.join(names)}) load their models in each pod, from the image, s3:// or https://; "
        "cache_size and disk_cache_size apply per pod.\n"
        "#   Over the Open Inference Protocol each model of an onnx or tensorflow one is the model <api>.<model> "
        "(GET /v2/models lists them).\n"
    )


def _many_models(predictor: dict[str, object]) -> bool:
    """``models`` with ``paths`` or ``dir``, or a python predictor's ``multi_model_reloading``."""
    models = predictor.get("models")
    return (isinstance(models, dict) and bool({"paths", "dir"} & set(models))) or isinstance(
        predictor.get("multi_model_reloading"), dict
    )
