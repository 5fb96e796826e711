"""Figures beyond one API's requests: a TrafficSplitter's requests per target and its shadow copies, the
failures of after-reply stages (a predictor's ``post_predict``), and gRPC calls refused before their message.

Example::

    extras = ExtraMetrics(metrics.registry)
    extras.routed("iris", "iris-onnx", 200)          # the splitter sent a request to iris-onnx: 200
    extras.shadowed("iris", "iris-recorder", "failed")
    read_splitters(metrics.collect())["iris"].targets  # {"iris-onnx": {"200": 1.0}}

They live in the same registry as every other figure (so with replicas prometheus_client's multiprocess
mode adds them up), and ``read_splitters`` is their one reader (``/stats``, ``localserve get``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.metrics_core import Metric

from localserve.metrics.names import GRPC_REFUSALS, POST_PREDICT_FAILURES, SPLITTER_REQUESTS, SPLITTER_SHADOW

SHADOW_OUTCOMES = ("answered", "failed", "dropped")  # 2xx; any other status; refused at admission (not sent)


class ExtraMetrics:
    """The counters of splitters and after-reply stages, registered once in a replica's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.post_predict_failures = Counter(
            POST_PREDICT_FAILURES,
            "post_predict calls that raised (after the answer was sent; logged, never sent).",
            ["api"],
            registry=registry,
        )
        self.splitter_requests = Counter(
            SPLITTER_REQUESTS,
            "Requests of a TrafficSplitter, by the API (target) that answered and its status code.",
            ["splitter", "target", "code"],
            registry=registry,
        )
        self.splitter_shadow = Counter(
            SPLITTER_SHADOW,
            "Copies of a TrafficSplitter's requests sent to its shadow API, by outcome (answered, failed, dropped).",
            ["splitter", "target", "outcome"],
            registry=registry,
        )
        self.grpc_refusals = Counter(
            GRPC_REFUSALS,
            "gRPC calls refused before their message was read: connection_buffer (the connection's messages not yet "
            "answered reached --max-body-size), message_timeout (not in within --body-timeout).",
            ["reason"],
            registry=registry,
        )

    def routed(self, splitter: str, target: str, status: int) -> None:
        """A request of ``splitter`` was answered by ``target`` with ``status``."""
        self.splitter_requests.labels(splitter, target, str(status)).inc()

    def shadowed(self, splitter: str, target: str, outcome: str) -> None:
        """A copy of a request of ``splitter`` went to its shadow ``target``: ``outcome`` is one of SHADOW_OUTCOMES."""
        self.splitter_shadow.labels(splitter, target, outcome).inc()

    def grpc_refused(self, reason: str) -> None:
        """A gRPC call was refused before its message was read, for ``reason``."""
        self.grpc_refusals.labels(reason).inc()

    def post_predict_failed(self, api: str) -> None:
        """An after-reply stage of ``api`` raised."""
        self.post_predict_failures.labels(api).inc()


@dataclass
class SplitterFigures:
    """What the metrics hold for one splitter (every replica's figures added up)."""

    targets: dict[str, dict[str, float]] = field(default_factory=dict)  # target -> status code -> requests
    shadow: dict[str, dict[str, float]] = field(default_factory=dict)  # shadow target -> outcome -> copies


def read_splitters(families: Iterable[Metric]) -> dict[str, SplitterFigures]:
    """Every splitter's figures from the metric families of ``Metrics.collect()``, keyed by splitter name."""
    splitters: dict[str, SplitterFigures] = {}
    for family in families:
        if family.name not in (SPLITTER_REQUESTS, SPLITTER_SHADOW):
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            figures = splitters.setdefault(labels["splitter"], SplitterFigures())
            if family.name == SPLITTER_REQUESTS:
                by = figures.targets.setdefault(labels["target"], {})
                key = labels["code"]
            else:
                by = figures.shadow.setdefault(labels["target"], {})
                key = labels["outcome"]
            by[key] = by.get(key, 0.0) + sample.value
    return splitters


def post_predict_failures(families: Iterable[Metric]) -> dict[str, float]:
    """post_predict failures per API, from the metric families of ``Metrics.collect()``."""
    failures: dict[str, float] = {}
    for family in families:
        if family.name == POST_PREDICT_FAILURES:
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    api = sample.labels["api"]
                    failures[api] = failures.get(api, 0.0) + sample.value
    return failures
