"""The figures read back from the metrics (metrics/figures.py): what the text says, and the one reader of them."""

from __future__ import annotations

import pytest

from localserve.metrics import Metrics
from tests.metrics.test_metrics import ROOT, scrape


def test_figures_are_what_the_text_says() -> None:
    metrics = Metrics(apis=["iris", "idle"])
    for status, seconds in [(200, 0.001), (200, 0.003), (404, 0.0002)]:
        metrics.request_started("iris")
        metrics.request_finished("iris", status, seconds)
    metrics.request_started("iris")
    metrics.observe_stage("iris", "inference", 0.002)
    metrics.observe_stage("iris", "inference", 0.004)
    metrics.observe_batch("iris", 3)
    metrics.observe_model_load("iris", 1.5)
    metrics.set_queue_depth("iris", 2)

    figures = metrics.figures()
    iris, idle = figures["iris"], figures["idle"]
    assert iris.codes == {"200": 2, "404": 1}
    assert (iris.requests("2xx"), iris.requests("4xx"), iris.requests("5xx")) == (2, 1, 0)
    assert (iris.in_flight, iris.queue_depth, iris.model_load) == (1, 2, 1.5)
    assert (iris.latency.count, iris.latency.sum) == (3, pytest.approx(0.0042))
    s = scrape(metrics.render()[0])
    text_buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (name, labels), value in s.items()
        if name == "localserve_request_duration_seconds_bucket" and dict(labels)["api"] == "iris"
    )
    assert iris.latency.buckets == text_buckets
    assert iris.latency.buckets[-1] == (float("inf"), 3)
    assert (iris.stages["inference"].count, iris.stages["inference"].sum) == (2, pytest.approx(0.006))
    assert (iris.batch_size.count, iris.batch_size.sum) == (1, 3)
    assert (idle.codes, idle.latency.count, idle.phases) == ({}, 0, {})


def test_nothing_in_the_package_reads_the_metrics_text_back() -> None:
    # One reader of the figures (localserve.metrics.figures over collect()); the text is for scrapers.
    readers = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "localserve").rglob("*.py"))
        if "prometheus_client.parser" in path.read_text() or "text_string_to_metric_families" in path.read_text()
    ]
    assert readers == []
