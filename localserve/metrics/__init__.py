"""Prometheus metrics for ``GET /metrics``, per API, right across replicas; and Cortex's ``metrics_client``.

Example::

    metrics = Metrics(apis=["iris"])
    metrics.request_started("iris")
    metrics.request_finished("iris", 200, 0.0012)
    body, content_type = metrics.render()

With ``LOCALSERVE_METRICS_DIR`` set (the supervisor sets it to one fresh folder for all replicas),
every process writes its figures to files there and ``render()`` adds them up (prometheus_client's
multiprocess mode); without it the figures live in this process only.
"""

from __future__ import annotations

import atexit
import logging
import math
import numbers
import os
import re
import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from glob import glob
from itertools import accumulate
from typing import Any

METRICS_DIR_ENV = "LOCALSERVE_METRICS_DIR"
_PROMETHEUS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def _metrics_dir() -> str | None:
    directory = os.environ.get(METRICS_DIR_ENV) or None
    if directory is not None:
        os.environ[_PROMETHEUS_DIR_ENV] = directory
    return directory


# prometheus_client chooses between in-process and file-backed values when it is imported,
# so the directory must be in its environment variable before the import below.
_metrics_dir()

from prometheus_client import (  # noqa: E402
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    values,
)
from prometheus_client import metrics as _prometheus_metrics  # noqa: E402
from prometheus_client import multiprocess as _multiprocess  # noqa: E402
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric  # noqa: E402
from prometheus_client.registry import Collector  # noqa: E402
from prometheus_client.samples import Sample  # noqa: E402
from prometheus_client.utils import floatToGoString  # noqa: E402

logger = logging.getLogger("localserve")

STAGES = ("pre_inference", "inference", "post_inference", "handler", "predict")
DURATION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
USER_BUCKETS = tuple(m * 10.0**e for e in range(-3, 6) for m in (1.0, 2.5, 5.0))
USER_PREFIX = "localserve_user_"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_REQUESTS = "localserve_requests"
_DURATION = "localserve_request_duration_seconds"
_STAGE = "localserve_stage_duration_seconds"
_IN_FLIGHT = "localserve_requests_in_flight"
_QUEUE_DEPTH = "localserve_queue_depth"
_BATCH_SIZE = "localserve_batch_size"
_MODEL_LOAD = "localserve_model_load_seconds"
_HELP = {
    _REQUESTS: "Requests answered, by status code.",
    _DURATION: "Time from request received to response ready.",
    _STAGE: "Time spent in each stage of a request (pre_inference, inference, post_inference, handler, predict).",
    _IN_FLIGHT: "Requests being served.",
    _QUEUE_DEPTH: "Requests waiting for a worker thread.",
    _BATCH_SIZE: "Samples per model call.",
    _MODEL_LOAD: "Time taken to load the API (slowest live replica).",
}
_CODE_LABELS = ["api", "code", "status_class"]
# Upper bounds with +Inf last: ``bisect_left`` gives the first bucket whose bound is >= the value,
# which is prometheus_client's ``value <= bound``.
_DURATION_BOUNDS = (*map(float, DURATION_BUCKETS), math.inf)
_BATCH_BOUNDS = (*map(float, BATCH_BUCKETS), math.inf)
_DURATION_LE = tuple(map(floatToGoString, _DURATION_BOUNDS))
_BATCH_LE = tuple(map(floatToGoString, _BATCH_BOUNDS))


class _Histogram:
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


class _ApiState:
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
        self.duration = _Histogram(len(_DURATION_BOUNDS))
        self.batch_size = _Histogram(len(_BATCH_BOUNDS))
        self.codes: dict[int, int] = {}
        self.stages: dict[str, _Histogram] = {}


class _ApiChildren:
    """The prometheus_client children of one API in multiprocess mode, written by ``Metrics.flush``."""

    __slots__ = ("batch_size", "codes", "duration", "in_flight", "model_load", "queue_depth", "stages")

    def __init__(self, metrics: Metrics, api: str) -> None:
        self.in_flight = metrics._in_flight.labels(api)
        self.duration = metrics._duration.labels(api)
        self.queue_depth = metrics._queue_depth.labels(api)
        self.batch_size = metrics._batch_size.labels(api)
        self.model_load = metrics._model_load.labels(api)
        self.codes: dict[int, Any] = {}
        self.stages: dict[str, Any] = {}


class Metrics:
    """The metrics of one replica process; the server owns one and calls it once or twice per request.

    The hot-path methods only update plain Python figures (see ``_ApiState``). Alone, the process
    exports them through a collector when ``render()`` is called; in multiprocess mode a background
    thread adds them to prometheus_client's shared files every ``FLUSH_INTERVAL`` seconds, and
    ``render()``, ``close()`` and the interpreter's exit flush what is left.
    """

    FLUSH_INTERVAL = 0.5

    def __init__(self, apis: Iterable[str] = ()) -> None:
        self.directory = _metrics_dir()
        self._registry = CollectorRegistry()
        self._apis: dict[str, _ApiState] = {}
        self._lock = threading.Lock()
        # Series in the order they appeared, as prometheus_client lists its children.
        self._code_series: list[tuple[str, int, float]] = []
        self._stage_series: list[tuple[str, str, _Histogram]] = []
        self._children: dict[str, _ApiChildren] = {}
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if self.directory is None:
            self._registry.register(_Collector(self))
        else:
            self._make_multiprocess_metrics()
        self._user = _UserMetrics(self._registry)
        for api in apis:
            self._api(api)
        if self.directory is not None:
            atexit.register(self.flush)
            self._flusher = threading.Thread(target=self._flush_every, name="localserve-metrics", daemon=True)
            self._flusher.start()

    def _make_multiprocess_metrics(self) -> None:
        if values.ValueClass is values.MutexValue:
            # prometheus_client was imported before the directory was known.
            values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
        reg = self._registry
        self._requests = Counter(_REQUESTS, _HELP[_REQUESTS], _CODE_LABELS, registry=reg)
        self._duration = Histogram(_DURATION, _HELP[_DURATION], ["api"], buckets=DURATION_BUCKETS, registry=reg)
        self._stage = Histogram(_STAGE, _HELP[_STAGE], ["api", "stage"], buckets=DURATION_BUCKETS, registry=reg)
        self._in_flight = Gauge(_IN_FLIGHT, _HELP[_IN_FLIGHT], ["api"], multiprocess_mode="livesum", registry=reg)
        self._queue_depth = Gauge(_QUEUE_DEPTH, _HELP[_QUEUE_DEPTH], ["api"], multiprocess_mode="livesum", registry=reg)
        self._batch_size = Histogram(_BATCH_SIZE, _HELP[_BATCH_SIZE], ["api"], buckets=BATCH_BUCKETS, registry=reg)
        self._model_load = Gauge(_MODEL_LOAD, _HELP[_MODEL_LOAD], ["api"], multiprocess_mode="livemax", registry=reg)

    def _api(self, api: str) -> _ApiState:
        state = self._apis.get(api)
        if state is None:
            with self._lock:
                state = self._apis.get(api)
                if state is None:
                    if self.directory is not None:
                        self._children[api] = _ApiChildren(self, api)
                    state = self._apis[api] = _ApiState()
        return state

    def request_started(self, api: str) -> None:
        """A request of ``api`` was admitted."""
        state = self._apis.get(api) or self._api(api)
        with state.lock:
            state.in_flight += 1

    def request_finished(self, api: str, status_code: int, seconds: float) -> None:
        """A request started with ``request_started`` was answered with ``status_code`` after ``seconds``."""
        self._count(self._apis.get(api) or self._api(api), api, status_code, seconds, 1)

    def request_rejected(self, api: str, status_code: int, seconds: float) -> None:
        """A request answered without ``request_started`` (e.g. 503 at admission): counted, never in flight."""
        self._count(self._apis.get(api) or self._api(api), api, status_code, seconds, 0)

    def _count(self, state: _ApiState, api: str, status_code: int, seconds: float, started: int) -> None:
        i = bisect_left(_DURATION_BOUNDS, seconds)
        with state.lock:
            state.in_flight -= started
            duration = state.duration
            duration.counts[i] += 1
            duration.sum += seconds
            codes = state.codes
            if status_code in codes:
                codes[status_code] += 1
            else:
                codes[status_code] = 1
                self._code_series.append((api, status_code, time.time()))

    def observe_stage(self, api: str, stage: str, seconds: float) -> None:
        """One stage of a request (see ``STAGES``) took ``seconds``."""
        state = self._apis.get(api) or self._api(api)
        histogram = state.stages.get(stage) or self._new_stage(state, api, stage)
        i = bisect_left(_DURATION_BOUNDS, seconds)
        with state.lock:
            histogram.counts[i] += 1
            histogram.sum += seconds

    def _new_stage(self, state: _ApiState, api: str, stage: str) -> _Histogram:
        with state.lock:
            histogram = state.stages.get(stage)
            if histogram is None:
                histogram = state.stages[stage] = _Histogram(len(_DURATION_BOUNDS))
                self._stage_series.append((api, stage, histogram))
        return histogram

    def set_queue_depth(self, api: str, n: int) -> None:
        """``n`` requests of ``api`` wait for a worker thread in this replica."""
        (self._apis.get(api) or self._api(api)).queue_depth = n

    def observe_batch(self, api: str, size: int) -> None:
        """The model of ``api`` ran once on ``size`` samples."""
        state = self._apis.get(api) or self._api(api)
        i = bisect_left(_BATCH_BOUNDS, size)
        with state.lock:
            state.batch_size.counts[i] += 1
            state.batch_size.sum += size

    def observe_model_load(self, api: str, seconds: float) -> None:
        """Loading ``api`` (model and user code) took ``seconds``."""
        (self._apis.get(api) or self._api(api)).model_load = seconds
        if self.directory is not None:
            self._children[api].model_load.set(seconds)

    def client(self, api: str) -> MetricsClient:
        """The ``metrics_client`` handed to the predictors of ``api``."""
        return MetricsClient(self._user, api)

    def render(self) -> tuple[bytes, str]:
        """The body and content type of ``GET /metrics``; all replicas' figures in multiprocess mode."""
        if self.directory is None:
            return generate_latest(self._registry), CONTENT_TYPE_LATEST
        self.flush()
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry, path=self.directory)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST

    def flush(self) -> None:
        """Write the figures gathered since the last flush to the metrics dir (multiprocess mode only)."""
        if self.directory is None:
            return
        with self._flush_lock:
            for api, state in list(self._apis.items()):
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
                        counter = children.codes[code] = self._requests.labels(api, str(code), f"{code // 100}xx")
                    counter.inc(n)
                for stage, taken in stages:
                    if taken is not None:
                        child = children.stages.get(stage)
                        if child is None:
                            child = children.stages[stage] = self._stage.labels(api, stage)
                        _add(child, taken)

    def close(self) -> None:
        """Stop the background flush and flush what is left; the figures stay readable."""
        if self._flusher is None:
            return
        self._stop.set()
        self._flusher.join()
        self._flusher = None
        atexit.unregister(self.flush)
        self.flush()

    def _flush_every(self) -> None:
        while not self._stop.wait(self.FLUSH_INTERVAL):
            try:
                self.flush()
            except Exception:  # a full disk must not stop the replica; the next flush tries again
                logger.exception("could not write the metrics to %s", self.directory)


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


class _Collector(Collector):
    """Exports a single process's ``Metrics`` as prometheus_client's own metrics would."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        metrics = self._metrics
        requests, duration, stage, in_flight, queue_depth, batch_size, model_load = families = self._families()
        created = getattr(_prometheus_metrics, "_use_created", True)
        snapshots = {}
        for api, state in list(metrics._apis.items()):
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
        for api, code, since in list(metrics._code_series):
            labels = [api, str(code), f"{code // 100}xx"]
            requests.add_metric(labels, float(snapshots[api][5][code]), created=since if created else None)
        for api, snapshot in snapshots.items():
            _add_histogram(duration, {"api": api}, _DURATION_LE, snapshot[3], created)
            in_flight.add_metric([api], float(snapshot[0]))
            queue_depth.add_metric([api], float(snapshot[1]))
            _add_histogram(batch_size, {"api": api}, _BATCH_LE, snapshot[4], created)
            model_load.add_metric([api], float(snapshot[2]))
        for api, name, _ in list(metrics._stage_series):
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
            CounterMetricFamily(_REQUESTS, _HELP[_REQUESTS], labels=_CODE_LABELS),
            HistogramMetricFamily(_DURATION, _HELP[_DURATION], labels=["api"]),
            HistogramMetricFamily(_STAGE, _HELP[_STAGE], labels=["api", "stage"]),
            GaugeMetricFamily(_IN_FLIGHT, _HELP[_IN_FLIGHT], labels=["api"]),
            GaugeMetricFamily(_QUEUE_DEPTH, _HELP[_QUEUE_DEPTH], labels=["api"]),
            HistogramMetricFamily(_BATCH_SIZE, _HELP[_BATCH_SIZE], labels=["api"]),
            GaugeMetricFamily(_MODEL_LOAD, _HELP[_MODEL_LOAD], labels=["api"]),
        )


def _add_histogram(
    family: HistogramMetricFamily,
    labels: dict[str, str],
    les: tuple[str, ...],
    snapshot: tuple[list[int], float, float],
    created: bool,
) -> None:
    counts, total, since = snapshot
    cumulative = list(accumulate(counts, initial=0.0))[1:]
    family.add_metric(list(labels.values()), list(zip(les, cumulative, strict=True)), total)
    if created:  # as prometheus_client's Histogram does, unless its _created series are disabled
        family.samples.append(Sample(family.name + "_created", labels, since))


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


class _UserMetric:
    __slots__ = ("kind", "labelnames", "metric")

    def __init__(self, kind: str, labelnames: tuple[str, ...], metric: Any) -> None:
        self.kind = kind
        self.labelnames = labelnames
        self.metric = metric


class _UserMetrics:
    """The metrics made through ``MetricsClient``s of one process, shared by all APIs."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._metrics: dict[str, _UserMetric] = {}
        self._children: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], Any] = {}
        self._lock = threading.Lock()

    def record(self, kind: str, api: str, name: Any, value: Any, tags: Any) -> None:
        try:
            child = self._child(kind, api, name, value, tags)
            if kind == "gauge":
                child.set(value)
            elif kind == "counter":
                child.inc(value)
            else:
                child.observe(value)
        except _UserMetricError as exc:
            logger.error("metrics_client.%s(%r): %s", _METHODS[kind], name, exc)
        except Exception as exc:  # a metrics call never fails the user's request
            logger.error("metrics_client.%s(%r) failed: %s", _METHODS[kind], name, exc)

    def _child(self, kind: str, api: str, name: Any, value: Any, tags: Any) -> Any:
        if not isinstance(name, str) or not _NAME_RE.match(name) or name.startswith("__"):
            raise _UserMetricError(
                f"invalid metric name {name!r}; use letters, digits and underscores, not starting with a digit"
            )
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise _UserMetricError(f"value must be a finite number, got {value!r}")
        if kind == "counter" and value < 0:
            raise _UserMetricError(f"a counter can only be increased; got {value!r}")
        label_items = _labels(tags)
        if kind == "counter" and name.endswith("_total"):
            name = name[: -len("_total")]
        cache_key = (kind, api, name, label_items)
        child = self._children.get(cache_key)
        if child is not None:
            return child
        with self._lock:
            labelnames = ("api", *(key for key, _ in label_items))
            user_metric = self._metrics.get(name)
            if user_metric is None:
                user_metric = self._metrics[name] = _UserMetric(kind, labelnames, self._make(kind, name, labelnames))
            elif user_metric.kind != kind:
                raise _UserMetricError(f"{name!r} is a {user_metric.kind}; it cannot also be a {kind}")
            elif user_metric.labelnames != labelnames:
                raise _UserMetricError(
                    f"{name!r} was first used with tags {list(user_metric.labelnames[1:])}, "
                    f"now with tags {list(labelnames[1:])}; a metric keeps one set of tag names"
                )
            child = user_metric.metric.labels(api, *(value for _, value in label_items))
            self._children[cache_key] = child
        return child

    def _make(self, kind: str, name: str, labelnames: tuple[str, ...]) -> Any:
        full_name = USER_PREFIX + name
        doc = f"User metric {name!r} (metrics_client.{_METHODS[kind]})."
        try:
            if kind == "gauge":
                return Gauge(full_name, doc, labelnames, registry=self._registry, multiprocess_mode="mostrecent")
            if kind == "counter":
                return Counter(full_name, doc, labelnames, registry=self._registry)
            return Histogram(full_name, doc, labelnames, buckets=USER_BUCKETS, registry=self._registry)
        except ValueError as exc:  # its series would clash with another metric's (e.g. "x_count" and histogram "x")
            raise _UserMetricError(str(exc)) from None


_METHODS = {"gauge": "put", "counter": "increment", "histogram": "histogram"}


class _UserMetricError(Exception):
    pass


def _labels(tags: Any) -> tuple[tuple[str, str], ...]:
    if tags is None:
        return ()
    if not isinstance(tags, Mapping):
        raise _UserMetricError(f"tags must be a dict of name to value, got {type(tags).__name__}")
    items = []
    for key, value in tags.items():
        if not isinstance(key, str) or not _NAME_RE.match(key) or key.startswith("__") or key == "api":
            raise _UserMetricError(
                f"invalid tag name {key!r}; use letters, digits and underscores ('api' is set by localserve)"
            )
        if not isinstance(value, (str, numbers.Number)):
            raise _UserMetricError(f"tag {key!r} must be a string or a number, got {type(value).__name__}")
        items.append((key, str(value)))
    return tuple(sorted(items))


class MetricsClient:
    """Cortex's ``metrics_client`` for predictors; a metric ``name`` is exported as ``localserve_user_<name>``.

    Tags become labels, beside ``api``. Mistakes (bad name, value or tags; one name used as two kinds,
    or with another set of tag names) are logged as errors and never raised into the predictor.
    """

    def __init__(self, user_metrics: _UserMetrics, api: str) -> None:
        self._user = user_metrics
        self._api = api

    def put(self, metric_name: str, value: float, tags: Mapping[str, Any] | None = None) -> None:
        """Set the gauge ``metric_name`` to ``value``."""
        self._user.record("gauge", self._api, metric_name, value, tags)

    def increment(self, metric_name: str, value: float = 1, tags: Mapping[str, Any] | None = None) -> None:
        """Add ``value`` to the counter ``metric_name`` (exported with the suffix ``_total``)."""
        self._user.record("counter", self._api, metric_name, value, tags)

    def histogram(self, metric_name: str, value: float, tags: Mapping[str, Any] | None = None) -> None:
        """Observe ``value`` in the histogram ``metric_name``."""
        self._user.record("histogram", self._api, metric_name, value, tags)
