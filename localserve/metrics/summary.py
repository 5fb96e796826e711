"""``GET /stats`` and ``GET /<api>/stats``: each API's status, counts, latency and tracker, read from the metrics.

Example::

    summary = StatsSummary(metrics, config.apis, status=lambda api: "ready")
    summary.record_prediction("iris", {"class_label": "setosa"})  # 2xx, after post_inference
    summary.api_json("iris")   # the body of GET /iris/stats; stats_json() for GET /stats

There is one source of figures: the prometheus_client metrics that ``GET /metrics`` serves (all
replicas' in multiprocess mode). The counts are those of ``localserve_requests_total`` by status
class, the latency's mean is sum / count of ``localserve_request_duration_seconds`` and its p50 and
p99 are interpolated in its buckets as Prometheus's ``histogram_quantile`` does; the tracker's
figures are its ``localserve_tracker_*`` metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from prometheus_client.metrics_core import Metric

from localserve.errors import NotFound
from localserve.metrics import (
    DURATION,
    REQUESTS,
    TRACKER_CLASS,
    TRACKER_MAX,
    TRACKER_MIN,
    TRACKER_TOTAL,
    TRACKER_VALUE,
    Metrics,
)
from localserve.tracker import Tracker, histogram

STATUS_CLASSES = ("2xx", "4xx", "5xx")


class _TrackerSpec(Protocol):
    @property
    def model_type(self) -> str: ...
    @property
    def key(self) -> str | None: ...


class _ApiSpec(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def tracker(self) -> _TrackerSpec | None: ...


class StatsSummary:
    """The ``/stats`` figures of every API of this server, derived from ``metrics``; owns the trackers."""

    def __init__(self, metrics: Metrics, apis: Iterable[_ApiSpec], status: Callable[[str], str]) -> None:
        self.metrics = metrics
        self.status = status  # "loading" | "ready" | "failed" of an API
        self.apis: list[str] = []
        self.trackers: dict[str, Tracker] = {}
        for api in apis:
            self.apis.append(api.name)
            if api.tracker is not None:
                self.trackers[api.name] = Tracker(api.name, api.tracker.model_type, api.tracker.key, metrics)

    def record_prediction(self, api: str, value: Any) -> None:
        """The value a 2xx response of ``api`` returned (after post_inference); nothing without a tracker."""
        tracker = self.trackers.get(api)
        if tracker is not None:
            tracker.record(value)

    def stats_json(self) -> list[dict[str, Any]]:
        """The body of ``GET /stats``: every API's figures, added up over all replicas."""
        read = _read(self.metrics.collect())
        return [self._api_json(name, read) for name in self.apis]

    def api_json(self, api: str) -> dict[str, Any]:
        """The body of ``GET /<api>/stats``: one API's figures, added up over all replicas."""
        if api not in self.apis:
            raise NotFound(f"No API named '{api}'; the server has: {', '.join(self.apis) or 'no APIs'}.")
        return self._api_json(api, _read(self.metrics.collect()))

    def _api_json(self, name: str, read: dict[str, _ApiRead]) -> dict[str, Any]:
        figures = read.get(name) or _ApiRead()
        count = figures.count
        latency: dict[str, float | None] = {"mean": None, "p50": None, "p99": None}
        if count:
            latency = {
                "mean": round(figures.sum / count, 9),
                "p50": round(bucket_quantile(0.5, figures.buckets), 9),
                "p99": round(bucket_quantile(0.99, figures.buckets), 9),
            }
        tracker = self.trackers.get(name)
        return {
            "api": name,
            "status": self.status(name),
            "requests": {c: int(figures.requests.get(c, 0)) for c in STATUS_CLASSES},
            "latency": latency,
            "tracker": None if tracker is None else _tracker_json(tracker, figures),
        }


class _ApiRead:
    """What one API's families hold, read once per ``/stats`` answer."""

    def __init__(self) -> None:
        self.requests: dict[str, float] = {}
        self.buckets: list[tuple[float, float]] = []  # (upper bound, cumulative count), +Inf last
        self.count = 0.0
        self.sum = 0.0
        self.classes: dict[str, float] = {}
        self.values = 0.0
        self.values_sum = 0.0
        self.value_buckets: list[tuple[float, float]] = []  # the regression histogram, as ``buckets``
        self.min: float | None = None
        self.max: float | None = None


def _read(families: Sequence[Metric]) -> dict[str, _ApiRead]:
    apis: dict[str, _ApiRead] = {}
    for family in families:
        if family.name not in _READ:
            continue
        for sample in family.samples:
            api = sample.labels.get("api")
            if api is None:
                continue
            read = apis.get(api) or apis.setdefault(api, _ApiRead())
            _READ[family.name](read, sample.name, sample.labels, sample.value)
    for read in apis.values():
        read.buckets.sort()
        read.value_buckets.sort()
    return apis


def _requests(read: _ApiRead, name: str, labels: dict[str, str], value: float) -> None:
    if name == REQUESTS + "_total":
        status_class = labels["status_class"]
        read.requests[status_class] = read.requests.get(status_class, 0.0) + value


def _duration(read: _ApiRead, name: str, labels: dict[str, str], value: float) -> None:
    if name == DURATION + "_bucket":
        read.buckets.append((float(labels["le"]), value))
    elif name == DURATION + "_count":
        read.count = value
    elif name == DURATION + "_sum":
        read.sum = value


def _classes(read: _ApiRead, name: str, labels: dict[str, str], value: float) -> None:
    if name == TRACKER_CLASS + "_total":
        read.classes[labels["class"]] = read.classes.get(labels["class"], 0.0) + value


def _values(read: _ApiRead, name: str, labels: dict[str, str], value: float) -> None:
    if name == TRACKER_VALUE + "_bucket":
        read.value_buckets.append((float(labels["le"]), value))
    elif name == TRACKER_VALUE + "_count":
        read.values = value


def _total(read: _ApiRead, name: str, labels: dict[str, str], value: float) -> None:
    read.values_sum = value


def _min(read: _ApiRead, name: str, labels: dict[str, str], value: float) -> None:
    read.min = value


def _max(read: _ApiRead, name: str, labels: dict[str, str], value: float) -> None:
    read.max = value


_READ: dict[str, Callable[[_ApiRead, str, dict[str, str], float], None]] = {
    REQUESTS: _requests,
    DURATION: _duration,
    TRACKER_CLASS: _classes,
    TRACKER_VALUE: _values,
    TRACKER_MIN: _min,
    TRACKER_MAX: _max,
    TRACKER_TOTAL: _total,
}


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """The ``q``-quantile of a histogram's ``(upper bound, cumulative count)`` buckets, +Inf last.

    As Prometheus's ``histogram_quantile``: linear interpolation inside the bucket that holds the
    rank ``q * count`` (from 0 for the first bucket); a rank in the +Inf bucket gives the highest
    finite bound.
    """
    count = buckets[-1][1]
    if not count:
        raise ValueError("quantile of an empty histogram")
    rank = q * count
    index = next((i for i, (_, n) in enumerate(buckets[:-1]) if n >= rank), len(buckets) - 1)
    if index == len(buckets) - 1:
        return buckets[-2][0]
    upper, below = buckets[index][0], 0.0
    lower = 0.0
    if index > 0:
        lower, below = buckets[index - 1]
    inside = buckets[index][1] - below
    return lower + (upper - lower) * (rank - below) / inside


def _tracker_json(tracker: Tracker, read: _ApiRead) -> dict[str, Any]:
    if tracker.model_type == "classification":
        classes = {label: int(n) for label, n in read.classes.items()}
        return {"model_type": "classification", "key": tracker.key, "classes": classes}
    count = int(read.values)
    return {
        "model_type": "regression",
        "key": tracker.key,
        "count": count,
        "min": read.min if count else None,
        "max": read.max if count else None,
        "mean": read.values_sum / count if count else None,
        "histogram": histogram(read.value_buckets),
    }
