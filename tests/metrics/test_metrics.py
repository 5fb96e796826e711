"""The metrics: counters, histograms and the figures read back from them, one series per label set.

Replicas sharing figures run as child Pythons: prometheus_client reads its multiprocess folder at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from localserve.metrics import (
    PHASES,
    Metrics,
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


def test_two_instances_in_one_process_do_not_clash() -> None:
    first, second = Metrics(apis=["a"]), Metrics(apis=["a"])
    first.request_started("a")
    assert scrape(second.render()[0])[key("localserve_requests_in_flight", api="a")] == 0


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
