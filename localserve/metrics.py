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

import logging
import math
import numbers
import os
import re
import threading
from collections.abc import Iterable, Mapping
from glob import glob
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
from prometheus_client import multiprocess as _multiprocess  # noqa: E402

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


class _ApiMetrics:
    """The label children of one API, made once so the hot path does no label lookup."""

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
    """The metrics of one replica process; the server owns one and calls it once or twice per request."""

    def __init__(self, apis: Iterable[str] = ()) -> None:
        self.directory = _metrics_dir()
        if self.directory is not None and values.ValueClass is values.MutexValue:
            # prometheus_client was imported before the directory was known.
            values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
        self._registry = CollectorRegistry()
        reg = self._registry
        self._requests = Counter(
            "localserve_requests", "Requests answered, by status code.", ["api", "code", "status_class"], registry=reg
        )
        self._duration = Histogram(
            "localserve_request_duration_seconds",
            "Time from request received to response ready.",
            ["api"],
            buckets=DURATION_BUCKETS,
            registry=reg,
        )
        self._stage = Histogram(
            "localserve_stage_duration_seconds",
            "Time spent in each stage of a request (pre_inference, inference, post_inference, handler, predict).",
            ["api", "stage"],
            buckets=DURATION_BUCKETS,
            registry=reg,
        )
        self._in_flight = Gauge(
            "localserve_requests_in_flight",
            "Requests being served.",
            ["api"],
            multiprocess_mode="livesum",
            registry=reg,
        )
        self._queue_depth = Gauge(
            "localserve_queue_depth",
            "Requests waiting for a worker thread.",
            ["api"],
            multiprocess_mode="livesum",
            registry=reg,
        )
        self._batch_size = Histogram(
            "localserve_batch_size", "Samples per model call.", ["api"], buckets=BATCH_BUCKETS, registry=reg
        )
        self._model_load = Gauge(
            "localserve_model_load_seconds",
            "Time taken to load the API (slowest live replica).",
            ["api"],
            multiprocess_mode="livemax",
            registry=reg,
        )
        self._apis: dict[str, _ApiMetrics] = {}
        self._lock = threading.Lock()
        self._user = _UserMetrics(reg)
        for api in apis:
            self._api(api)

    def _api(self, api: str) -> _ApiMetrics:
        children = self._apis.get(api)
        if children is None:
            with self._lock:
                children = self._apis.get(api)
                if children is None:
                    children = self._apis[api] = _ApiMetrics(self, api)
        return children

    def request_started(self, api: str) -> None:
        """A request of ``api`` was admitted."""
        (self._apis.get(api) or self._api(api)).in_flight.inc()

    def request_finished(self, api: str, status_code: int, seconds: float) -> None:
        """A request started with ``request_started`` was answered with ``status_code`` after ``seconds``."""
        children = self._apis.get(api) or self._api(api)
        children.in_flight.dec()
        self._count(children, api, status_code, seconds)

    def request_rejected(self, api: str, status_code: int, seconds: float) -> None:
        """A request answered without ``request_started`` (e.g. 503 at admission): counted, never in flight."""
        self._count(self._apis.get(api) or self._api(api), api, status_code, seconds)

    def _count(self, children: _ApiMetrics, api: str, status_code: int, seconds: float) -> None:
        children.duration.observe(seconds)
        counter = children.codes.get(status_code)
        if counter is None:
            counter = self._requests.labels(api, str(status_code), f"{status_code // 100}xx")
            children.codes[status_code] = counter
        counter.inc()

    def observe_stage(self, api: str, stage: str, seconds: float) -> None:
        """One stage of a request (see ``STAGES``) took ``seconds``."""
        children = self._apis.get(api) or self._api(api)
        child = children.stages.get(stage)
        if child is None:
            child = children.stages[stage] = self._stage.labels(api, stage)
        child.observe(seconds)

    def set_queue_depth(self, api: str, n: int) -> None:
        """``n`` requests of ``api`` wait for a worker thread in this replica."""
        (self._apis.get(api) or self._api(api)).queue_depth.set(n)

    def observe_batch(self, api: str, size: int) -> None:
        """The model of ``api`` ran once on ``size`` samples."""
        (self._apis.get(api) or self._api(api)).batch_size.observe(size)

    def observe_model_load(self, api: str, seconds: float) -> None:
        """Loading ``api`` (model and user code) took ``seconds``."""
        (self._apis.get(api) or self._api(api)).model_load.set(seconds)

    def client(self, api: str) -> MetricsClient:
        """The ``metrics_client`` handed to the predictors of ``api``."""
        return MetricsClient(self._user, api)

    def render(self) -> tuple[bytes, str]:
        """The body and content type of ``GET /metrics``; all replicas' figures in multiprocess mode."""
        if self.directory is None:
            return generate_latest(self._registry), CONTENT_TYPE_LATEST
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry, path=self.directory)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST


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
