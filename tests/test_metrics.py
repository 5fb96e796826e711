from __future__ import annotations

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
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from localserve.metrics import (
    BATCH_BUCKETS,
    DURATION_BUCKETS,
    Metrics,
    MetricsClient,
    mark_process_dead,
    prepare_metrics_dir,
)

ROOT = Path(__file__).resolve().parent.parent

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(body: bytes) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


@pytest.fixture(autouse=True)
def _no_metrics_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCALSERVE_METRICS_DIR", raising=False)


def test_request_figures_are_exact() -> None:
    metrics = Metrics(apis=["iris"])
    for status, seconds in [(200, 0.001), (200, 0.003), (400, 0.0002), (503, 0.5)]:
        metrics.request_started("iris")
        metrics.request_finished("iris", status, seconds)
    metrics.request_started("iris")
    metrics.request_rejected("iris", 503, 0.0001)

    body, content_type = metrics.render()
    assert content_type.startswith("text/plain; version=")
    s = scrape(body)
    assert s[key("localserve_requests_total", api="iris", code="200", status_class="2xx")] == 2
    assert s[key("localserve_requests_total", api="iris", code="400", status_class="4xx")] == 1
    assert s[key("localserve_requests_total", api="iris", code="503", status_class="5xx")] == 2
    assert s[key("localserve_request_duration_seconds_count", api="iris")] == 5
    assert s[key("localserve_request_duration_seconds_sum", api="iris")] == pytest.approx(0.5043)
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.00025")] == 2
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.001")] == 3
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.0025")] == 3
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.005")] == 4
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="+Inf")] == 5
    assert s[key("localserve_requests_in_flight", api="iris")] == 1  # the rejected one never started


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
    import sys
    from localserve.metrics import Metrics
    metrics = Metrics(apis=["iris"])
    code = int(sys.argv[1])
    for _ in range(int(sys.argv[2])):
        metrics.request_started("iris")
        metrics.request_finished("iris", code, 0.002)
    metrics.request_started("iris")  # still in flight when the process exits
    metrics.set_queue_depth("iris", int(sys.argv[2]))
    metrics.observe_batch("iris", 4)
    metrics.observe_model_load("iris", float(sys.argv[2]))
    metrics.client("iris").increment("hits", tags={"kind": "x"})
    print(__import__("os").getpid())
    """
)

RENDER = textwrap.dedent(
    """
    import sys
    from localserve.metrics import Metrics, mark_process_dead
    for pid in sys.argv[1:]:
        mark_process_dead(int(pid))
    sys.stdout.write(Metrics().render()[0].decode())
    """
)


def _python(code: str, metrics_dir: Path, *args: str) -> str:
    env = {**os.environ, "LOCALSERVE_METRICS_DIR": str(metrics_dir), "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
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
    assert s[key("localserve_requests_total", api="iris", code="200", status_class="2xx")] == 3
    assert s[key("localserve_requests_total", api="iris", code="500", status_class="5xx")] == 5
    assert s[key("localserve_request_duration_seconds_count", api="iris")] == 8
    assert s[key("localserve_request_duration_seconds_bucket", api="iris", le="0.0025")] == 8
    assert s[key("localserve_request_duration_seconds_sum", api="iris")] == pytest.approx(0.016)
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
    assert s[key("localserve_requests_total", api="iris", code="500", status_class="5xx")] == 5
    assert pid_a != pid_b


LATE_ENV = textwrap.dedent(
    """
    import os, sys
    import localserve.metrics  # imported before the replica's environment is set, as a spawned replica does
    os.environ["LOCALSERVE_METRICS_DIR"] = sys.argv[1]
    metrics = localserve.metrics.Metrics(apis=["iris"])
    metrics.request_started("iris")
    metrics.request_finished("iris", 200, 0.002)
    """
)


def test_metrics_dir_set_after_import_still_counts(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LOCALSERVE_METRICS_DIR", None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    subprocess.run([sys.executable, "-c", LATE_ENV, str(tmp_path)], env=env, check=True, timeout=60)
    s = scrape(_python(RENDER, tmp_path).encode())
    assert s[key("localserve_requests_total", api="iris", code="200", status_class="2xx")] == 1


def test_prepare_metrics_dir_removes_an_earlier_runs_files(tmp_path: Path) -> None:
    (tmp_path / "counter_12.db").write_bytes(b"x")
    (tmp_path / "stats-12.json").write_text("{}")
    (tmp_path / "keep.txt").write_text("")
    prepare_metrics_dir(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_mark_process_dead_with_the_supervisors_dir(tmp_path: Path) -> None:
    for name in ("gauge_livesum_41.db", "gauge_livemax_41.db", "counter_41.db", "gauge_livesum_42.db"):
        (tmp_path / name).write_bytes(b"")
    mark_process_dead(41, str(tmp_path))  # the supervisor's own environment has no LOCALSERVE_METRICS_DIR
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter_41.db", "gauge_livesum_42.db"]


def test_concurrent_updates_from_worker_threads_are_exact() -> None:
    metrics = Metrics(apis=["iris"])
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible to expose lost updates
    try:
        barrier = threading.Barrier(5)

        def worker() -> None:
            barrier.wait()
            for _ in range(20_000):
                metrics.observe_stage("iris", "inference", 0.002)
                metrics.observe_stage("iris", "pre_inference", 0.0001)

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
    assert s[key("localserve_requests_total", api="iris", code="200", status_class="2xx")] == 20_000
    assert s[key("localserve_request_duration_seconds_count", api="iris")] == 20_000
    assert s[key("localserve_requests_in_flight", api="iris")] == 0


def test_render_matches_prometheus_client_objects() -> None:
    """The collector exports what prometheus_client's own Counter, Gauge and Histogram would."""
    metrics = Metrics(apis=["iris", "mnist"])
    registry = CollectorRegistry()
    requests = Counter("localserve_requests", "x", ["api", "code", "status_class"], registry=registry)
    duration = Histogram(
        "localserve_request_duration_seconds", "x", ["api"], buckets=DURATION_BUCKETS, registry=registry
    )
    stage = Histogram(
        "localserve_stage_duration_seconds", "x", ["api", "stage"], buckets=DURATION_BUCKETS, registry=registry
    )
    batch = Histogram("localserve_batch_size", "x", ["api"], buckets=BATCH_BUCKETS, registry=registry)
    for api in ("iris", "mnist"):
        duration.labels(api)
        batch.labels(api)
    for api, code, seconds in [("iris", 200, 0.001), ("mnist", 404, 0.0001), ("iris", 500, 0.3), ("mnist", 200, 61.0)]:
        metrics.request_started(api)
        metrics.request_finished(api, code, seconds)
        requests.labels(api, str(code), f"{code // 100}xx").inc()
        duration.labels(api).observe(seconds)
    for api, name, seconds in [("mnist", "inference", 0.01), ("iris", "handler", 0.0005), ("iris", "handler", 100.0)]:
        metrics.observe_stage(api, name, seconds)
        stage.labels(api, name).observe(seconds)
    for size in (1, 3, 1024, 5000):
        metrics.observe_batch("iris", size)
        batch.labels("iris").observe(size)

    ours, theirs = scrape(metrics.render()[0]), scrape(generate_latest(registry))
    assert {k: v for k, v in ours.items() if not k[0].endswith("_created") and k in theirs} == {
        k: v for k, v in theirs.items() if not k[0].endswith("_created")
    }
    assert {k for k in ours if k[0].endswith("_created")} == {k for k in theirs if k[0].endswith("_created")}


REPLICA_EXITS_HARD = textwrap.dedent(
    """
    import os, sys
    from localserve.metrics import Metrics
    metrics = Metrics(apis=["iris"])
    for _ in range(3):
        metrics.request_started("iris")
        metrics.observe_stage("iris", "inference", 0.002)
        metrics.request_finished("iris", 200, 0.002)
    if sys.argv[1] == "close":
        metrics.close()
    elif sys.argv[1] == "render":
        assert b'localserve_requests_total{api="iris",code="200",status_class="2xx"} 3.0' in metrics.render()[0]
    else:  # wait for the background flush, reading the files as another replica would
        import time
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.multiprocess import MultiProcessCollector
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=os.environ["LOCALSERVE_METRICS_DIR"])
        deadline = time.monotonic() + 30
        while b"code=" not in generate_latest(registry) and time.monotonic() < deadline:
            time.sleep(0.05)
    os._exit(0)  # no atexit: only what was flushed before counts
    """
)


@pytest.mark.parametrize("how", ["close", "render", "background"])
def test_replica_figures_are_flushed_before_it_exits(tmp_path: Path, how: str) -> None:
    _python(REPLICA_EXITS_HARD, tmp_path, how)
    s = scrape(_python(RENDER, tmp_path).encode())
    assert s[key("localserve_requests_total", api="iris", code="200", status_class="2xx")] == 3
    assert s[key("localserve_request_duration_seconds_count", api="iris")] == 3
    assert s[key("localserve_stage_duration_seconds_count", api="iris", stage="inference")] == 3
    assert s[key("localserve_stage_duration_seconds_bucket", api="iris", stage="inference", le="0.0025")] == 3
    assert s[key("localserve_requests_in_flight", api="iris")] == 0
