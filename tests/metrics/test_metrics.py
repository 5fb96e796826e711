"""The metrics: counters, histograms and the figures read back from them, one series per label set.

Replicas sharing figures run as child Pythons: prometheus_client reads its multiprocess folder at import.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from localserve.metrics import (
    PHASES,
    Metrics,
    MetricsClient,
    prepare_metrics_dir,
)

ROOT = Path(__file__).resolve().parents[2]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(body: bytes) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


def test_request_figures_are_exact() -> None:
    metrics = Metrics(apis=["iris"])
    for status, seconds in [(200, 0.001), (200, 0.003), (400, 0.0002), (503, 0.5)]:
        metrics.request_started("iris")
        metrics.request_finished("iris", status, seconds)
    metrics.request_started("iris")
    metrics.count(metrics.api("iris"), 503, 0.0001)  # answered by the server before it started

    body, headers = metrics.render()
    assert headers["Content-Type"].startswith("text/plain; version=")
    s = scrape(body)
    assert s[key("localserve_requests_total", api="iris", code="200")] == 2
    assert s[key("localserve_requests_total", api="iris", code="400")] == 1
    assert s[key("localserve_requests_total", api="iris", code="503")] == 2
    assert s[key("localserve_request_duration_seconds_count", api="iris")] == 5
    assert s[key("localserve_request_duration_seconds_sum", api="iris")] == pytest.approx(0.5043)
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.00025")] == 2
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.001")] == 3
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.0025")] == 3
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.005")] == 4
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="+Inf")] == 5
    assert s[key("localserve_requests_in_flight", api="iris")] == 1  # started, not finished


def test_stage_queue_batch_and_model_load() -> None:
    metrics = Metrics(apis=["iris", "mnist"])
    metrics.observe_stage("iris", "pre_inference", 0.0001)
    metrics.observe_stage("iris", "inference", 0.002)
    metrics.observe_stage("iris", "inference", 0.004)
    metrics.set_queue_depth("iris", 3)
    metrics.set_queue_depth("iris", 2)
    metrics.observe_batch("iris", 1)
    metrics.observe_batch("iris", 7)
    metrics.observe_model_load("mnist", 1.25)

    s = scrape(metrics.render()[0])
    assert s[key("localserve_stage_duration_seconds_count", api="iris", stage="inference")] == 2
    assert s[key("localserve_stage_duration_seconds_sum", api="iris", stage="inference")] == pytest.approx(0.006)
    assert s[key("localserve_stage_duration_seconds_count", api="iris", stage="pre_inference")] == 1
    assert s[key("localserve_queue_depth", api="iris")] == 2
    assert s[key("localserve_batch_size_count", api="iris")] == 2
    assert s[key("localserve_batch_size_sum", api="iris")] == 8
    assert s[key("localserve_batch_size_bucket", api="iris", le="4.0")] == 1
    assert s[key("localserve_batch_size_bucket", api="iris", le="8.0")] == 2
    assert s[key("localserve_model_load_seconds", api="mnist")] == 1.25
    # Precreated children: every API shows up from the start, at zero.
    assert s[key("localserve_requests_in_flight", api="mnist")] == 0
    assert s[key("localserve_request_duration_seconds_count", api="mnist")] == 0


def test_a_stage_observer_counts_into_the_same_series_and_adds_none_before_use() -> None:
    metrics = Metrics(apis=["iris"])
    observe = metrics.stage_observer("iris")
    observe("inference", 0.002)
    observe("inference", 0.004)
    metrics.observe_stage("iris", "inference", 0.001)
    observe("post_inference", 0.0005)

    s = scrape(metrics.render()[0])
    assert s[key("localserve_stage_duration_seconds_count", api="iris", stage="inference")] == 3
    assert s[key("localserve_stage_duration_seconds_sum", api="iris", stage="inference")] == pytest.approx(0.007)
    assert s[key("localserve_stage_duration_seconds_count", api="iris", stage="post_inference")] == 1
    assert key("localserve_stage_duration_seconds_count", api="iris", stage="pre_inference") not in s


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


def test_phases_are_observed_together_once_per_request() -> None:
    metrics = Metrics(apis=["iris"])
    observe = metrics.phase_observer("iris")
    observe([10.0, 10.5, 11.0, 13.0, 13.25])  # queued, started, prepared, model's output, finished
    observe([20.0, 21.0, 23.0])  # answered in its prepare stage (an ABEJA handler): no model, no finish
    phases = metrics.figures()["iris"].phases
    assert {name: (d.count, d.sum) for name, d in phases.items()} == {
        "queue": (2, 1.5),
        "prepare": (2, 2.5),
        "model": (2, 2.0),
        "finish": (2, 0.25),
    }
    assert list(phases) == list(PHASES)


def test_nothing_in_the_package_reads_the_metrics_text_back() -> None:
    # One reader of the figures (localserve.metrics.figures over collect()); the text is for scrapers.
    readers = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "localserve").rglob("*.py"))
        if "prometheus_client.parser" in path.read_text() or "text_string_to_metric_families" in path.read_text()
    ]
    assert readers == []


def test_two_instances_in_one_process_do_not_clash() -> None:
    first, second = Metrics(apis=["a"]), Metrics(apis=["a"])
    first.request_started("a")
    assert scrape(second.render()[0])[key("localserve_requests_in_flight", api="a")] == 0


def test_metrics_client_exports_user_metrics() -> None:
    metrics = Metrics(apis=["iris"])
    client = metrics.client("iris")
    client.put("temperature", 21.5)
    client.put("temperature", np.float32(22.0))
    client.increment("hits", tags={"model": "v2", "shard": 3})
    client.increment("hits", 2, tags={"shard": 3, "model": "v2"})
    client.increment("errors_total")
    client.histogram("confidence", 0.7, tags={"label": "setosa"})
    client.histogram("confidence", np.int64(3), tags={"label": "setosa"})
    metrics.client("mnist").increment("hits", tags={"model": "v1", "shard": 0})

    s = scrape(metrics.render()[0])
    assert s[key("localserve_user_temperature", api="iris")] == 22.0
    assert s[key("localserve_user_hits_total", api="iris", model="v2", shard="3")] == 3
    assert s[key("localserve_user_hits_total", api="mnist", model="v1", shard="0")] == 1
    assert s[key("localserve_user_errors_total", api="iris")] == 1
    assert s[key("localserve_user_confidence_count", api="iris", label="setosa")] == 2
    assert s[key("localserve_user_confidence_sum", api="iris", label="setosa")] == pytest.approx(3.7)
    assert s[key("localserve_user_confidence_bucket", api="iris", label="setosa", le="1.0")] == 1


def test_metrics_client_takes_cortex_calls() -> None:
    """Cortex's MetricsClient (v0.30+): gauge / increment / histogram, keyword ``metric``; ``put`` stays."""
    metrics = Metrics(apis=["iris"])
    client = metrics.client("iris")
    client.gauge("active_connections", 1001, tags={"protocol": "http"})
    client.gauge(metric="queue", value=3)
    client.increment(metric="model_calls", tags={"model_version": "v1"})
    client.increment("model_calls", 2, {"model_version": "v1"})
    client.increment(metric_name="model_calls", value=1, tags={"model_version": "v1"})
    client.histogram(metric="inference_time_milliseconds", value=120, tags={"model_version": "v1"})
    client.put(metric="queue", value=4)

    s = scrape(metrics.render()[0])
    assert s[key("localserve_user_active_connections", api="iris", protocol="http")] == 1001
    assert s[key("localserve_user_queue", api="iris")] == 4
    assert s[key("localserve_user_model_calls_total", api="iris", model_version="v1")] == 4
    assert s[key("localserve_user_inference_time_milliseconds_count", api="iris", model_version="v1")] == 1
    assert s[key("localserve_user_inference_time_milliseconds_sum", api="iris", model_version="v1")] == 120


@pytest.mark.parametrize("method", ["gauge", "put", "increment", "histogram"])
@pytest.mark.parametrize("name", ["cortex_latency", "istio_requests"])
def test_metrics_client_refuses_cortex_prefixes_as_cortex_did(method: str, name: str) -> None:
    client = Metrics(apis=["iris"]).client("iris")
    with pytest.raises(ValueError) as info:
        getattr(client, method)(name, 1)
    assert str(info.value) == (
        f"Metric name ({name}) is invalid because it starts with a cortex exclusive prefix.\n"
        "The following are prefixes are exclusive to cortex: ('cortex_', 'istio_')."
    )


def test_metrics_client_takes_the_name_once() -> None:
    client = Metrics(apis=["iris"]).client("iris")
    with pytest.raises(TypeError) as info:
        client.increment("a", metric_name="b")
    assert str(info.value) == "metrics_client.increment() takes the metric's name once, as 'metric' or 'metric_name'"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.put("bad name", 1), "metrics_client.put('bad name'): invalid metric name 'bad name'"),
        (lambda c: c.put("1st", 1), "invalid metric name '1st'"),
        (lambda c: c.put(42, 1), "invalid metric name 42"),
        (lambda c: c.put("x", "12"), "metrics_client.put('x'): value must be a finite number, got '12'"),
        (lambda c: c.put("x", True), "value must be a finite number, got True"),
        (lambda c: c.histogram("x", float("nan")), "value must be a finite number, got nan"),
        (lambda c: c.increment("x", -1), "metrics_client.increment('x'): a counter can only be increased; got -1"),
        (lambda c: c.put("x", 1, tags=["a"]), "tags must be a dict of name to value, got list"),
        (lambda c: c.put("x", 1, tags={"api": "a"}), "invalid tag name 'api'"),
        (lambda c: c.put("x", 1, tags={"my-tag": "a"}), "invalid tag name 'my-tag'"),
        (lambda c: c.put("x", 1, tags={"t": None}), "tag 't' must be a string or a number, got NoneType"),
    ],
)
def test_metrics_client_mistakes_are_logged_not_raised(
    call: Callable[[MetricsClient], None], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = Metrics(apis=["iris"]).client("iris")
    with caplog.at_level(logging.ERROR, logger="localserve"):
        call(client)
    assert len(caplog.records) == 1
    assert caplog.records[0].name == "localserve"
    assert message in caplog.records[0].getMessage()


def test_metrics_client_keeps_one_kind_and_one_tag_set(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics(apis=["iris"])
    client = metrics.client("iris")
    client.put("load", 1, tags={"gpu": 0})
    with caplog.at_level(logging.ERROR, logger="localserve"):
        client.increment("load")
        client.put("load", 2, tags={"gpu": 0, "host": "a"})
        client.histogram("lat", 1)
        client.put("lat_count", 1)  # would clash with the histogram's series
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "metrics_client.increment('load'): 'load' is a gauge; it cannot also be a counter"
    assert messages[1] == (
        "metrics_client.put('load'): 'load' was first used with tags ['gpu'], now with tags ['gpu', 'host']; "
        "a metric keeps one set of tag names"
    )
    assert messages[2].startswith("metrics_client.put('lat_count'): Duplicated time")
    assert len(messages) == 3
    assert scrape(metrics.render()[0])[key("localserve_user_load", api="iris", gpu="0")] == 1


WORKER = textwrap.dedent(
    """
    import os, sys
    from localserve.metrics import Metrics
    metrics = Metrics(apis=["iris"], directory=os.environ["PROMETHEUS_MULTIPROC_DIR"])
    code = int(sys.argv[1])
    for _ in range(int(sys.argv[2])):
        metrics.request_started("iris")
        metrics.request_finished("iris", code, 0.002)
    metrics.request_started("iris")  # still in flight when the process exits
    metrics.set_queue_depth("iris", int(sys.argv[2]))
    metrics.observe_batch("iris", 4)
    metrics.observe_stage("iris", "inference", 0.002)
    metrics.observe_model_load("iris", float(sys.argv[2]))
    metrics.client("iris").increment("hits", tags={"kind": "x"})
    metrics.phase_observer("iris")([0.0, 0.25, 0.5, 1.0, 1.125])
    print(os.getpid())
    os._exit(0)  # no clean-up of any kind: what was counted is in the files already
    """
)

RENDER = textwrap.dedent(
    """
    import os, sys
    from localserve.metrics import Metrics, mark_process_dead
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    for pid in sys.argv[1:]:
        mark_process_dead(int(pid), directory)
    sys.stdout.write(Metrics(directory=directory).render()[0].decode())
    """
)

FIGURES = textwrap.dedent(
    """
    import dataclasses, json, os
    from localserve.metrics import Metrics
    figures = Metrics(directory=os.environ["PROMETHEUS_MULTIPROC_DIR"]).figures()
    print(json.dumps({api: dataclasses.asdict(f) for api, f in figures.items()}))
    """
)


def _python(code: str, metrics_dir: Path, *args: str) -> str:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def test_replicas_share_figures_through_the_metrics_dir(tmp_path: Path) -> None:
    metrics_dir = tmp_path / "metrics"
    prepare_metrics_dir(str(metrics_dir))
    pid_a = _python(WORKER, metrics_dir, "200", "3").strip()
    pid_b = _python(WORKER, metrics_dir, "500", "5").strip()

    s = scrape(_python(RENDER, metrics_dir).encode())
    assert s[key("localserve_requests_total", api="iris", code="200")] == 3
    assert s[key("localserve_requests_total", api="iris", code="500")] == 5
    assert s[key("localserve_request_duration_seconds_count", api="iris")] == 8
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.0025")] == 8
    assert s[key("localserve_request_duration_seconds_sum", api="iris")] == pytest.approx(0.016)
    assert s[key("localserve_stage_duration_seconds_count", api="iris", stage="inference")] == 2
    assert s[key("localserve_requests_in_flight", api="iris")] == 2  # livesum over both replicas
    assert s[key("localserve_queue_depth", api="iris")] == 8
    assert s[key("localserve_batch_size_count", api="iris")] == 2
    assert s[key("localserve_model_load_seconds", api="iris")] == 5  # the slowest replica
    assert s[key("localserve_user_hits_total", api="iris", kind="x")] == 2

    # A replica that died no longer counts in the live gauges; what it served still counts.
    s = scrape(_python(RENDER, metrics_dir, pid_b).encode())
    assert s[key("localserve_requests_in_flight", api="iris")] == 1
    assert s[key("localserve_queue_depth", api="iris")] == 3
    assert s[key("localserve_model_load_seconds", api="iris")] == 3
    assert s[key("localserve_requests_total", api="iris", code="500")] == 5
    assert pid_a != pid_b


def test_figures_add_up_the_replicas_as_the_text_does(tmp_path: Path) -> None:
    metrics_dir = tmp_path / "metrics"
    prepare_metrics_dir(str(metrics_dir))
    _python(WORKER, metrics_dir, "200", "3")
    _python(WORKER, metrics_dir, "500", "5")
    iris = json.loads(_python(FIGURES, metrics_dir))["iris"]
    assert iris["codes"] == {"200": 3, "500": 5}
    assert (iris["in_flight"], iris["queue_depth"], iris["model_load"]) == (2, 8, 5)
    assert (iris["latency"]["count"], iris["latency"]["sum"]) == (8, pytest.approx(0.016))
    assert (iris["batch_size"]["count"], iris["batch_size"]["sum"]) == (2, 8)
    assert {phase: (d["count"], d["sum"]) for phase, d in iris["phases"].items()} == {
        "queue": (2, 0.5),
        "prepare": (2, 0.5),
        "model": (2, 1.0),
        "finish": (2, 0.25),
    }


def test_concurrent_updates_from_worker_threads_are_exact() -> None:
    metrics = Metrics(apis=["iris"])
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible to expose lost updates
    try:
        barrier = threading.Barrier(5)

        phases = metrics.phase_observer("iris")

        def worker() -> None:
            barrier.wait()
            for _ in range(20_000):
                metrics.observe_stage("iris", "inference", 0.002)
                metrics.observe_stage("iris", "pre_inference", 0.0001)
                phases([0.0, 0.5, 1.0, 1.5, 2.0])

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        barrier.wait()
        for _ in range(20_000):  # the event loop's share, at the same time
            metrics.request_started("iris")
            metrics.set_queue_depth("iris", 1)
            metrics.request_finished("iris", 200, 0.003)
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)

    s = scrape(metrics.render()[0])
    assert s[key("localserve_stage_duration_seconds_count", api="iris", stage="inference")] == 80_000
    assert s[key("localserve_stage_duration_seconds_bucket", api="iris", stage="inference", le="0.0025")] == 80_000
    assert s[key("localserve_stage_duration_seconds_sum", api="iris", stage="inference")] == pytest.approx(160.0)
    assert s[key("localserve_stage_duration_seconds_count", api="iris", stage="pre_inference")] == 80_000
    assert s[key("localserve_requests_total", api="iris", code="200")] == 20_000
    assert s[key("localserve_request_duration_seconds_count", api="iris")] == 20_000
    assert s[key("localserve_requests_in_flight", api="iris")] == 0
    for phase in PHASES:
        assert s[key("localserve_request_phase_seconds_count", api="iris", phase=phase)] == 80_000
        assert s[key("localserve_request_phase_seconds_sum", api="iris", phase=phase)] == 40_000
