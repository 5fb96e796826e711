"""The figures of a multi-model API's model versions: each event of a version becomes its figure, read back
by ``read_figures`` as the API's ``models``."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from localserve.metrics.figures import read_figures
from localserve.metrics.models import ModelMetrics


def test_loads_evictions_and_calls_of_each_version_are_its_own_figures() -> None:
    registry = CollectorRegistry()
    observer = ModelMetrics(registry, buckets=(0.01, 0.1, 1.0)).observer("multi")
    observer.loaded("a", 1, 0.5)
    observer.loaded("a", 1, 1.5)  # loaded again after an eviction
    observer.evicted("a", 1, "cache")
    observer.loaded("b", 2, 0.25)
    observer.evicted("b", 2, "replaced")
    observer.ran("b", 2, 0.05)
    observer.ran("b", 2, 0.5)

    models = read_figures(registry.collect())["multi"].models
    assert set(models) == {("a", "1"), ("b", "2")}
    a, b = models["a", "1"], models["b", "2"]
    assert (a.loads, a.evictions, a.load_time.count, a.load_time.sum) == (2.0, {"cache": 1.0}, 2.0, 2.0)
    assert a.latency.count == 0.0
    assert (b.loads, b.evictions) == (1.0, {"replaced": 1.0})
    assert (b.latency.count, b.latency.sum) == (2.0, pytest.approx(0.55))
    assert b.latency.buckets == [(0.01, 0.0), (0.1, 1.0), (1.0, 2.0), (float("inf"), 2.0)]
