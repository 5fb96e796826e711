"""Multiprocess mode: each replica adds its figures to prometheus_client's files in the metrics dir."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from glob import glob
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client import multiprocess as _multiprocess

# The package sets this before importing its submodules, so that it is defined while this one loads.
from localserve.metrics import METRICS_DIR_ENV
from localserve.metrics.state import (
    BATCH_BUCKETS,
    BATCH_SIZE,
    CODE_LABELS,
    DURATION,
    DURATION_BUCKETS,
    HELP,
    IN_FLIGHT,
    MODEL_LOAD,
    QUEUE_DEPTH,
    REQUESTS,
    STAGE,
    ApiState,
)


class _ApiChildren:
    """The prometheus_client children of one API, written by ``MultiprocessWriter.flush``."""

    __slots__ = ("batch_size", "codes", "duration", "in_flight", "model_load", "queue_depth", "stages")

    def __init__(self, writer: MultiprocessWriter, api: str) -> None:
        self.in_flight = writer.in_flight.labels(api)
        self.duration = writer.duration.labels(api)
        self.queue_depth = writer.queue_depth.labels(api)
        self.batch_size = writer.batch_size.labels(api)
        self.model_load = writer.model_load.labels(api)
        self.codes: dict[int, Any] = {}
        self.stages: dict[str, Any] = {}


class MultiprocessWriter:
    """The file-backed prometheus_client metrics of one process, to which ``flush`` adds its ``ApiState``s."""

    def __init__(self, registry: CollectorRegistry) -> None:
        if values.ValueClass is values.MutexValue:
            # prometheus_client was imported before the directory was known.
            values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
        reg = registry
        self.requests = Counter(REQUESTS, HELP[REQUESTS], CODE_LABELS, registry=reg)
        self.duration = Histogram(DURATION, HELP[DURATION], ["api"], buckets=DURATION_BUCKETS, registry=reg)
        self.stage = Histogram(STAGE, HELP[STAGE], ["api", "stage"], buckets=DURATION_BUCKETS, registry=reg)
        self.in_flight = Gauge(IN_FLIGHT, HELP[IN_FLIGHT], ["api"], multiprocess_mode="livesum", registry=reg)
        self.queue_depth = Gauge(QUEUE_DEPTH, HELP[QUEUE_DEPTH], ["api"], multiprocess_mode="livesum", registry=reg)
        self.batch_size = Histogram(BATCH_SIZE, HELP[BATCH_SIZE], ["api"], buckets=BATCH_BUCKETS, registry=reg)
        self.model_load = Gauge(MODEL_LOAD, HELP[MODEL_LOAD], ["api"], multiprocess_mode="livemax", registry=reg)
        self._children: dict[str, _ApiChildren] = {}
        self._lock = threading.Lock()

    def add_api(self, api: str) -> None:
        """Make the series of ``api``; called once per API, before its first ``flush``."""
        self._children[api] = _ApiChildren(self, api)

    def set_model_load(self, api: str, seconds: float) -> None:
        """Write the load time of ``api`` at once: it is set once, and a scrape may come before the next flush."""
        self._children[api].model_load.set(seconds)

    def flush(self, apis: Mapping[str, ApiState]) -> None:
        """Write the figures gathered in ``apis`` since the last flush, resetting its counters and histograms."""
        with self._lock:
            for api, state in list(apis.items()):
                with state.lock:
                    in_flight, queue_depth = state.in_flight, state.queue_depth
                    duration, batch_size = state.duration.take(), state.batch_size.take()
                    codes = [(code, n) for code, n in state.codes.items() if n]
                    for code, _ in codes:
                        state.codes[code] = 0
                    stages = [(stage, h.take()) for stage, h in state.stages.items()]
                children = self._children[api]
                children.in_flight.set(in_flight)
                children.queue_depth.set(queue_depth)
                _add(children.duration, duration)
                _add(children.batch_size, batch_size)
                for code, n in codes:
                    counter = children.codes.get(code)
                    if counter is None:
                        counter = children.codes[code] = self.requests.labels(api, str(code), f"{code // 100}xx")
                    counter.inc(n)
                for stage, taken in stages:
                    if taken is not None:
                        child = children.stages.get(stage)
                        if child is None:
                            child = children.stages[stage] = self.stage.labels(api, stage)
                        _add(child, taken)


def _add(child: Any, taken: tuple[list[int], float] | None) -> None:
    # prometheus_client's Histogram has no public way to add many observations at once; its
    # per-bucket values (not cumulative, like ours) and sum are the ones ``observe`` increments.
    if taken is None:
        return
    counts, total = taken
    child._sum.inc(total)
    for bucket, n in zip(child._buckets, counts, strict=True):
        if n:
            bucket.inc(n)


def render_directory(directory: str) -> bytes:
    """The exposition of every replica's figures in ``directory``, added up."""
    registry = CollectorRegistry()
    _multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def prepare_metrics_dir(directory: str) -> None:
    """Create ``directory`` for the replicas' metrics and stats, removing files of an earlier run."""
    os.makedirs(directory, exist_ok=True)
    for path in glob(os.path.join(directory, "*.db")) + glob(os.path.join(directory, "stats-*.json")):
        os.remove(path)


def mark_process_dead(pid: int, directory: str | None = None) -> None:
    """Tell the metrics that replica ``pid`` has exited: its in-flight and queue gauges stop counting.

    Its counters and histograms stay: the requests it answered did happen.
    """
    directory = directory or os.environ.get(METRICS_DIR_ENV)
    if directory:
        _multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
