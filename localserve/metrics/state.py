"""One process's figures as plain Python, and the collector that exports them when the process is alone."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate

from prometheus_client import metrics as _prometheus_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

STAGES = ("pre_inference", "inference", "post_inference", "handler", "predict")
DURATION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

REQUESTS = "localserve_requests"
DURATION = "localserve_request_duration_seconds"
STAGE = "localserve_stage_duration_seconds"
IN_FLIGHT = "localserve_requests_in_flight"
QUEUE_DEPTH = "localserve_queue_depth"
BATCH_SIZE = "localserve_batch_size"
MODEL_LOAD = "localserve_model_load_seconds"
HELP = {
    REQUESTS: "Requests answered, by status code.",
    DURATION: "Time from request received to response ready.",
    STAGE: "Time spent in each stage of a request (pre_inference, inference, post_inference, handler, predict).",
    IN_FLIGHT: "Requests being served.",
    QUEUE_DEPTH: "Requests waiting for a worker thread.",
    BATCH_SIZE: "Samples per model call.",
    MODEL_LOAD: "Time taken to load the API (slowest live replica).",
}
CODE_LABELS = ["api", "code", "status_class"]
# Upper bounds with +Inf last: ``bisect_left`` gives the first bucket whose bound is >= the value,
# which is prometheus_client's ``value <= bound``.
DURATION_BOUNDS = (*map(float, DURATION_BUCKETS), math.inf)
BATCH_BOUNDS = (*map(float, BATCH_BUCKETS), math.inf)
_DURATION_LE = tuple(map(floatToGoString, DURATION_BOUNDS))
_BATCH_LE = tuple(map(floatToGoString, BATCH_BOUNDS))


class PlainHistogram:
    """Bucket counts (not cumulative, the last one for +Inf) and sum of one labelled histogram."""

    __slots__ = ("counts", "created", "sum")

    def __init__(self, size: int) -> None:
        self.counts = [0] * size
        self.sum = 0.0
        self.created = time.time()

    def take(self) -> tuple[list[int], float] | None:
        """The figures since the last ``take``, reset to zero; ``None`` if nothing was observed."""
        if not any(self.counts):
            return None
        counts, total = self.counts, self.sum
        self.counts, self.sum = [0] * len(counts), 0.0
        return counts, total


CodeSeries = list[tuple[str, int, float]]
"""``(api, status_code, created)`` of each requests series, in the order they appeared."""
StageSeries = list[tuple[str, str, PlainHistogram]]
"""``(api, stage, histogram)`` of each stage series, in the order they appeared."""


class ApiState:
    """The figures of one API as plain Python, so that a request pays no prometheus_client call.

    Every update holds ``lock``: ``observe_stage`` runs on worker threads while the event loop counts
    requests, and ``x += 1`` is a read and a write that another thread can slip between. One
    uncontended lock costs ~0.15 µs; per-thread shards would save that but need merging and
    bookkeeping for threads that come and go. A gauge ``set`` is one attribute store, atomic as it is.
    In multiprocess mode counters and histograms hold what has not been flushed yet.
    """

    __slots__ = ("batch_size", "codes", "duration", "in_flight", "lock", "model_load", "queue_depth", "stages")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.queue_depth = 0
        self.model_load = 0.0
        self.duration = PlainHistogram(len(DURATION_BOUNDS))
        self.batch_size = PlainHistogram(len(BATCH_BOUNDS))
        self.codes: dict[int, int] = {}
        self.stages: dict[str, PlainHistogram] = {}


class StateCollector(Collector):
    """Exports a single process's ``ApiState``s as prometheus_client's own metrics would."""

    def __init__(self, apis: Mapping[str, ApiState], code_series: CodeSeries, stage_series: StageSeries) -> None:
        # The owner's containers, read as they are at each scrape.
        self._apis = apis
        self._code_series = code_series
        self._stage_series = stage_series

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        requests, duration, stage, in_flight, queue_depth, batch_size, model_load = families = self._families()
        created = getattr(_prometheus_metrics, "_use_created", True)
        snapshots = {}
        for api, state in list(self._apis.items()):
            with state.lock:
                snapshots[api] = (
                    state.in_flight,
                    state.queue_depth,
                    state.model_load,
                    (list(state.duration.counts), state.duration.sum, state.duration.created),
                    (list(state.batch_size.counts), state.batch_size.sum, state.batch_size.created),
                    dict(state.codes),
                    {name: (list(h.counts), h.sum, h.created) for name, h in state.stages.items()},
                )
        # Series first seen after the snapshots above (a new code or stage on another thread
        # meanwhile) are left for the next scrape.
        for api, code, since in list(self._code_series):
            if api not in snapshots or code not in snapshots[api][5]:
                continue
            labels = [api, str(code), f"{code // 100}xx"]
            requests.add_metric(labels, float(snapshots[api][5][code]), created=since if created else None)
        for api, snapshot in snapshots.items():
            _add_histogram(duration, {"api": api}, _DURATION_LE, snapshot[3], created)
            in_flight.add_metric([api], float(snapshot[0]))
            queue_depth.add_metric([api], float(snapshot[1]))
            _add_histogram(batch_size, {"api": api}, _BATCH_LE, snapshot[4], created)
            model_load.add_metric([api], float(snapshot[2]))
        for api, name, _ in list(self._stage_series):
            if api not in snapshots or name not in snapshots[api][6]:
                continue
            _add_histogram(stage, {"api": api, "stage": name}, _DURATION_LE, snapshots[api][6][name], created)
        return families

    @staticmethod
    def _families() -> tuple[
        CounterMetricFamily,
        HistogramMetricFamily,
        HistogramMetricFamily,
        GaugeMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        GaugeMetricFamily,
    ]:
        return (
            CounterMetricFamily(REQUESTS, HELP[REQUESTS], labels=CODE_LABELS),
            HistogramMetricFamily(DURATION, HELP[DURATION], labels=["api"]),
            HistogramMetricFamily(STAGE, HELP[STAGE], labels=["api", "stage"]),
            GaugeMetricFamily(IN_FLIGHT, HELP[IN_FLIGHT], labels=["api"]),
            GaugeMetricFamily(QUEUE_DEPTH, HELP[QUEUE_DEPTH], labels=["api"]),
            HistogramMetricFamily(BATCH_SIZE, HELP[BATCH_SIZE], labels=["api"]),
            GaugeMetricFamily(MODEL_LOAD, HELP[MODEL_LOAD], labels=["api"]),
        )


def _add_histogram(
    family: HistogramMetricFamily,
    labels: dict[str, str],
    les: Sequence[str],
    snapshot: tuple[list[int], float, float],
    created: bool,
) -> None:
    counts, total, since = snapshot
    cumulative = list(accumulate(counts, initial=0.0))[1:]
    family.add_metric(list(labels.values()), list(zip(les, cumulative, strict=True)), total)
    if created:  # as prometheus_client's Histogram does, unless its _created series are disabled
        family.samples.append(Sample(family.name + "_created", labels, since))
