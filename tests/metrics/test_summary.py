"""The figures of ``/stats``, read from the metrics: request counts, the mean and the quantiles of latency as
Prometheus's ``histogram_quantile`` interpolates them, the trackers, and every replica's figures added up.

Replicas sharing figures run as child Pythons: prometheus_client reads its multiprocess folder at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from localserve.config import ApiConfig, TrackerConfig
from localserve.errors import NotFound
from localserve.metrics import Metrics
from localserve.metrics.summary import StatsSummary, bucket_quantile

ROOT = Path(__file__).resolve().parents[2]


def summary_of(*apis: ApiConfig) -> tuple[Metrics, StatsSummary]:
    metrics = Metrics([api.name for api in apis])
    return metrics, StatsSummary(metrics, apis, lambda name: "ready" if name == "iris" else "loading")


def test_counts_and_latency_are_read_from_the_metrics() -> None:
    metrics, summary = summary_of(ApiConfig(name="iris", handler="main:handler"))
    iris = metrics.api("iris")
    for _ in range(98):
        metrics.count(iris, 200, 0.001)
    metrics.count(iris, 404, 2.0)
    metrics.count(iris, 500, 2.0)
    metrics.count(iris, 302, 0.001)  # latency counts; 3xx has no column
    figures = summary.api_json("iris")
    assert figures["requests"] == {"2xx": 98, "4xx": 1, "5xx": 1}
    assert figures["latency"]["mean"] == pytest.approx((99 * 0.001 + 4.0) / 101)
    # As Prometheus's histogram_quantile: rank 50.5 of the 99 in (0.0005, 0.001], rank 99.99 in (1, 2.5].
    assert figures["latency"]["p50"] == pytest.approx(0.0005 + 0.0005 * 50.5 / 99)
    assert figures["latency"]["p99"] == pytest.approx(1.0 + 1.5 * (99.99 - 99) / 2)


def test_latency_quantiles_are_interpolated_in_the_buckets() -> None:
    metrics, summary = summary_of(ApiConfig(name="iris", handler="main:handler"))
    for i in range(1, 1001):
        metrics.count(metrics.api("iris"), 200, i / 1000)  # 1 ms .. 1 s
    latency = summary.api_json("iris")["latency"]
    assert latency["mean"] == pytest.approx(0.5005)
    assert latency["p50"] == pytest.approx(0.5)
    assert latency["p99"] == pytest.approx(0.99)


def test_bucket_quantile_edges() -> None:
    buckets = [(0.1, 0.0), (1.0, 4.0), (float("inf"), 5.0)]
    assert bucket_quantile(0.5, buckets) == pytest.approx(0.1 + 0.9 * 2.5 / 4)
    assert bucket_quantile(0.99, buckets) == 1.0  # in the +Inf bucket: the highest finite bound
    assert bucket_quantile(0.0, [(0.5, 2.0), (float("inf"), 2.0)]) == 0.0
    with pytest.raises(ValueError, match=r"^quantile of an empty histogram$"):
        bucket_quantile(0.5, [(0.5, 0.0), (float("inf"), 0.0)])


def test_stats_json_for_the_server() -> None:
    apis = [
        ApiConfig(name="iris", handler="main:handler", tracker=TrackerConfig("classification", "class_label")),
        ApiConfig(name="price", handler="main:handler", tracker=TrackerConfig("regression")),
        ApiConfig(name="echo", handler="main:handler"),
    ]
    metrics, stats = summary_of(*apis)
    for _ in range(3):
        metrics.count(metrics.api("iris"), 200, 0.004)
        stats.record_prediction("iris", {"class_label": "setosa"})
    metrics.count(metrics.api("iris"), 400, 0.004)
    stats.record_prediction("price", 2.0)
    stats.record_prediction("price", 4)
    stats.record_prediction("echo", "anything")  # no tracker: nothing

    assert stats.api_json("iris") == {
        "api": "iris",
        "status": "ready",
        "requests": {"2xx": 3, "4xx": 1, "5xx": 0},
        "latency": {"mean": 0.004, "p50": 0.00375, "p99": 0.004975},  # 4 in (0.0025, 0.005]
        "tracker": {"model_type": "classification", "key": "class_label", "classes": {"setosa": 3}},
    }
    assert stats.stats_json()[1:] == [
        {
            "api": "price",
            "status": "loading",
            "requests": {"2xx": 0, "4xx": 0, "5xx": 0},
            "latency": {"mean": None, "p50": None, "p99": None},
            "tracker": {
                "model_type": "regression",
                "key": None,
                "count": 2,
                "min": 2.0,
                "max": 4.0,
                "mean": 3.0,
                "histogram": [[1.0, 2.0, 1], [2.0, 5.0, 1]],
            },
        },
        {
            "api": "echo",
            "status": "loading",
            "requests": {"2xx": 0, "4xx": 0, "5xx": 0},
            "latency": {"mean": None, "p50": None, "p99": None},
            "tracker": None,
        },
    ]
    with pytest.raises(NotFound, match=r"^No API named 'nope'; the server has: iris, price, echo\.$"):
        stats.api_json("nope")


REPLICA = textwrap.dedent(
    """
    import os, sys
    from localserve.config import ApiConfig, TrackerConfig
    from localserve.metrics import Metrics
    from localserve.metrics.summary import StatsSummary
    metrics = Metrics(["iris"], directory=os.environ["PROMETHEUS_MULTIPROC_DIR"])
    api = ApiConfig(name="iris", handler="main:handler", tracker=TrackerConfig("classification", "label"))
    summary = StatsSummary(metrics, [api], lambda _: "ready")
    for label in sys.argv[1:]:
        metrics.count(metrics.api("iris"), 200, 0.002)
        summary.record_prediction("iris", {"label": label})
    metrics.count(metrics.api("iris"), 500, 0.5)
    print(__import__("json").dumps(summary.api_json("iris")))
    """
)


def test_replicas_figures_add_up_through_the_metrics_dir(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}

    def replica(*labels: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", REPLICA, *labels], env=env, check=True, timeout=60, capture_output=True, text=True
        )
        figures: dict[str, Any] = json.loads(done.stdout)
        return figures

    replica("a", "a", "b")
    figures = replica("b", "c")  # the second replica reads both
    assert figures["requests"] == {"2xx": 5, "4xx": 0, "5xx": 2}
    assert figures["latency"]["mean"] == pytest.approx((5 * 0.002 + 2 * 0.5) / 7)
    assert figures["tracker"]["classes"] == {"a": 2, "b": 2, "c": 1}
