"""A lone process's tallied counter and histograms are written exactly as prometheus_client's own classes would be."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from localserve.metrics import BATCH_BUCKETS, DURATION_BUCKETS, Metrics
from localserve.metrics.tallies import TalliedCounters, TalliedHistograms


def _registries() -> tuple[CollectorRegistry, CollectorRegistry]:
    return CollectorRegistry(), CollectorRegistry()


@pytest.mark.parametrize("buckets", [DURATION_BUCKETS, BATCH_BUCKETS])
def test_a_tallied_histogram_is_written_as_prometheus_clients(buckets: tuple[float, ...]) -> None:
    theirs, ours = _registries()
    reference = Histogram("demo", "A demo family.", ["api", "stage"], buckets=buckets, registry=theirs)
    tallied = TalliedHistograms("demo", "A demo family.", ["api", "stage"], buckets)
    ours.register(tallied)
    empty = (generate_latest(theirs), generate_openmetrics(theirs))
    assert (generate_latest(ours), generate_openmetrics(ours)) == empty  # no child yet: the family's head alone
    values = [0.0, buckets[0], buckets[0] * 1.5, buckets[3], buckets[-1], buckets[-1] * 2, 1e9, 3e-7]
    for index, value in enumerate(values):
        labels = ("iris", "inference") if index % 3 else ("mlp", "pre_inference")
        reference.labels(*labels).observe(value)
        tallied.labels(*labels).observe(value)
    assert generate_latest(ours) == generate_latest(theirs)
    assert generate_openmetrics(ours) == generate_openmetrics(theirs)


def test_a_tallied_histograms_exemplars_are_written_as_prometheus_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """A traced request's trace id is its bucket's exemplar (the last one observed there), in OpenMetrics only."""
    monkeypatch.setattr(time, "time", lambda: 1_790_000_000.5)  # the exemplars' timestamps
    theirs, ours = _registries()
    reference = Histogram("demo", "A demo family.", ["api"], buckets=DURATION_BUCKETS, registry=theirs)
    tallied = TalliedHistograms("demo", "A demo family.", ["api"], DURATION_BUCKETS)
    ours.register(tallied)
    for value, trace_id in ((0.0011, "a" * 32), (0.0012, "b" * 32), (0.3, None), (7.0, "c" * 32)):
        exemplar = None if trace_id is None else {"trace_id": trace_id}
        reference.labels("iris").observe(value, exemplar)
        tallied.labels("iris").observe(value, exemplar)
    openmetrics = generate_openmetrics(ours)
    assert openmetrics == generate_openmetrics(theirs)
    assert b'# {trace_id="bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"} 0.0012 1790000000.5' in openmetrics
    assert b"aaaa" not in openmetrics and b"trace_id" not in generate_latest(ours)


def test_a_tallied_counter_is_written_as_prometheus_clients() -> None:
    theirs, ours = _registries()
    reference = Counter("demo", "A demo family.", ["api", "code"], registry=theirs)
    tallied = TalliedCounters("demo", "A demo family.", ["api", "code"])
    ours.register(tallied)
    for labels, amount in ((("iris", "200"), 1.0), (("iris", "503"), 1.0), (("iris", "200"), 2.5)):
        reference.labels(*labels).inc(amount)
        tallied.labels(*labels).inc(amount)
    assert generate_latest(ours) == generate_latest(theirs)
    assert generate_openmetrics(ours) == generate_openmetrics(theirs)


def test_a_lone_process_reads_its_figures_from_its_tallies() -> None:
    """(Replicas keep prometheus_client's classes and their files: ``test_metrics.py`` runs them.)"""
    alone = Metrics(["iris"])
    alone.request_started("iris")
    alone.request_finished("iris", 200, 0.002)
    alone.observe_stage("iris", "inference", 0.001)
    alone.observe_batch("iris", 3)
    figures = alone.figures()["iris"]
    assert figures.requests("2xx") == 1 and figures.latency.count == 1 and figures.batch_size.count == 1
    assert figures.stages["inference"].count == 1 and figures.stages["inference"].sum == pytest.approx(0.001)
    assert isinstance(alone.duration, TalliedHistograms) and isinstance(alone.requests, TalliedCounters)
