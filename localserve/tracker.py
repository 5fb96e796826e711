"""Cortex's prediction tracker and the request stats of one API in one process (see ``stats.py``).

Both keep a JSON-able ``state()`` made of sums and fixed buckets, so the states of several
replicas add up exactly. ``tracker_metrics`` writes the trackers' merged states as Prometheus
text for ``GET /metrics``, so a scrape, ``/stats`` and the dashboard show the same figures.
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString as _go_float

MODEL_TYPES = ("classification", "regression")

logger = logging.getLogger("localserve")

# Latency buckets: 20 per decade from 10 µs to 1000 s, each ~12% wide, keeping count and sum; a quantile
# is the mean of the bucket it falls in (exact when that bucket's values are equal, else within ~12%).
# The buckets are fixed, so those of several processes add up.
_LOW = 1e-5
_PER_DECADE = 20
_N_BUCKETS = 8 * _PER_DECADE + 1
_SCALE = _PER_DECADE / math.log(10)


# The regression histogram's bins are fixed, not adapted to the values seen, so that the bins of
# several replicas add up and a Prometheus scrape sees the same buckets every time: 0 and
# ±{1, 2, 5}·10^k for k in -3..5, and ±10^6; a bin holds the values in (lower bound, upper bound];
# values beyond ±10^6 fall in the two outer bins. /stats and the dashboard show the bins that hold a
# value, lowest first (the dashboard marks empty bins between two with a gap).
_STEPS = tuple(float(f"{m}e{k}") for k in range(-3, 6) for m in (1, 2, 5)) + (1e6,)
REGRESSION_BOUNDS: tuple[float, ...] = (*sorted(-s for s in _STEPS), 0.0, *_STEPS)


def _bucket(seconds: float, log: Any = math.log) -> int:
    if seconds < _LOW:
        return 0
    index = 1 + int(log(seconds / _LOW) * _SCALE)
    return index if index < _N_BUCKETS else _N_BUCKETS - 1


class ApiStats:
    """Status-class counts and latency of one API in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.changes = 0
        self._codes = {"2xx": 0, "4xx": 0, "5xx": 0}
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = 0.0
        self._buckets = [0] * _N_BUCKETS
        self._bucket_sums = [0.0] * _N_BUCKETS

    def record(self, status_code: int, seconds: float) -> None:
        """One response: its status counts if it is 2xx, 4xx or 5xx; its latency always counts."""
        status_class = _STATUS_CLASSES.get(status_code // 100)
        index = _bucket(seconds)
        with self._lock:
            self.changes += 1
            if status_class is not None:
                self._codes[status_class] += 1
            self._count += 1
            self._sum += seconds
            if seconds < self._min:
                self._min = seconds
            if seconds > self._max:
                self._max = seconds
            self._buckets[index] += 1
            self._bucket_sums[index] += seconds

    def state(self) -> dict[str, Any]:
        """A JSON-able state that ``stats.merge_api`` can add to another process's."""
        with self._lock:
            return {
                "requests": dict(self._codes),
                "latency": {
                    "count": self._count,
                    "sum": self._sum,
                    "min": self._min if self._count else None,
                    "max": self._max if self._count else None,
                    "buckets": {str(i): [n, self._bucket_sums[i]] for i, n in enumerate(self._buckets) if n},
                },
            }


_STATUS_CLASSES = {2: "2xx", 4: "4xx", 5: "5xx"}


class Tracker:
    """Cortex's ``tracker``: the class distribution or the regression stats of what an API returns."""

    def __init__(self, api: str, model_type: str, key: str | None = None) -> None:
        if model_type not in MODEL_TYPES:
            raise ValueError(f"tracker model_type must be 'classification' or 'regression', got {model_type!r}")
        self.api = api
        self.model_type = model_type
        self.key = key
        self.changes = 0
        self._lock = threading.Lock()
        self._classes: dict[str, int] = {}
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._bins = [0] * (len(REGRESSION_BOUNDS) + 1)

    def record(self, value: Any) -> None:
        """Track the value a 2xx response returned (after post_inference); a wrong value is a warning."""
        try:
            self._record(value)
        except Exception as exc:  # the tracker never fails a request
            logger.warning("tracker of api '%s': could not track %s: %s", self.api, _describe(value), exc)

    def _record(self, value: Any) -> None:
        what = "the response"
        if self.key is not None:
            if not isinstance(value, Mapping):
                self._warn(f"expected a JSON object holding '{self.key}', got {_describe(value)}")
                return
            if self.key not in value:
                keys = ", ".join(repr(k) for k in list(value)[:10])
                self._warn(f"the response has no key '{self.key}' (its keys: {keys or 'none'})")
                return
            value = value[self.key]
            what = f"'{self.key}'"
        elif isinstance(value, Mapping):
            self._warn("the response is a JSON object; set 'key' in 'tracker' to the field to track")
            return
        if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
            value = value.item()  # a 0-d numpy array
        if self.model_type == "classification":
            if isinstance(value, str):
                label = str(value)
            elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
                label = str(int(value))
            else:
                self._warn(f"{what} must be an int or a str for classification, got {_describe(value)}")
                return
            with self._lock:
                self.changes += 1
                self._classes[label] = self._classes.get(label, 0) + 1
            return
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            self._warn(f"{what} must be a finite number for regression, got {_describe(value)}")
            return
        number = float(value)
        index = bisect_left(REGRESSION_BOUNDS, number)
        with self._lock:
            self._bins[index] += 1
            self.changes += 1
            self._count += 1
            self._sum += number
            self._min = min(self._min, number)
            self._max = max(self._max, number)

    def _warn(self, message: str) -> None:
        logger.warning("tracker of api '%s': %s", self.api, message)

    def state(self) -> dict[str, Any]:
        """A JSON-able state that ``stats.merge_tracker`` can add to another process's."""
        with self._lock:
            if self.model_type == "classification":
                return {"model_type": self.model_type, "key": self.key, "classes": dict(self._classes)}
            return {
                "model_type": self.model_type,
                "key": self.key,
                "count": self._count,
                "sum": self._sum,
                "min": self._min if self._count else None,
                "max": self._max if self._count else None,
                "buckets": {str(i): n for i, n in enumerate(self._bins) if n},
            }


def add_buckets(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """Add the regression bins of ``other``'s state to ``into``'s (the states of two replicas)."""
    buckets = into.setdefault("buckets", {})
    for index, n in other.get("buckets", {}).items():
        buckets[index] = buckets.get(index, 0) + n


def histogram(buckets: Mapping[str, int]) -> list[list[float | int | None]]:
    """A regression state's non-empty bins, lowest first, as ``[[lower, upper, count], ...]``.

    A bin holds the values in (lower, upper]; ``None`` stands for -inf / +inf (JSON has no infinity).
    """
    bounds: list[float | None] = [None, *REGRESSION_BOUNDS, None]
    counts = sorted((int(i), n) for i, n in buckets.items() if n)
    return [[bounds[i], bounds[i + 1], n] for i, n in counts]


def tracker_metrics(trackers: Iterable[tuple[str, Mapping[str, Any]]]) -> bytes:
    """The Prometheus text of ``(api, tracker JSON of /stats)`` pairs, to append to ``GET /metrics``.

    ``localserve_tracker_predictions_total{api, class}`` counts a classification's classes;
    ``localserve_tracker_value{api}`` is a regression's histogram (the fixed ``REGRESSION_BOUNDS``; its
    count is the ``+Inf`` bucket: prometheus_client, following OpenMetrics, writes no ``_sum`` and
    ``_count`` for a histogram with negative bounds), ``localserve_tracker_value_min``, ``_max`` and
    ``_mean`` its figures. Empty without trackers.
    """
    trackers = list(trackers)
    if not trackers:
        return b""

    class Collector:
        def collect(self) -> Iterable[Any]:
            classes = CounterMetricFamily(
                "localserve_tracker_predictions",
                "Predictions per class (tracker, classification)",
                labels=["api", "class"],
            )
            values = HistogramMetricFamily(
                "localserve_tracker_value", "Predicted values (tracker, regression)", labels=["api"]
            )
            gauges = {
                figure: GaugeMetricFamily(f"localserve_tracker_value_{figure}", f"{what} (tracker)", labels=["api"])
                for figure, what in (
                    ("min", "Lowest predicted value"),
                    ("max", "Highest predicted value"),
                    ("mean", "Mean predicted value"),
                )
            }
            for api, state in trackers:
                if state["model_type"] == "classification":
                    for label, n in state["classes"].items():
                        classes.add_metric([api, label], n)
                    continue
                values.add_metric([api], _cumulative(state["histogram"]), None)
                if state["count"]:
                    for figure, gauge in gauges.items():
                        gauge.add_metric([api], state[figure])
            yield from (family for family in (classes, values, *gauges.values()) if family.samples)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return generate_latest(registry)


# How prometheus_client writes a bucket's bound ("0.5", "1e+06"); the library leaves it untyped.
_bound_label = cast("Callable[[float], str]", _go_float)


def _cumulative(bins: Sequence[Sequence[float | int | None]]) -> list[tuple[str, float]]:
    """Every fixed bound with the count of values at or below it, from ``histogram``'s bins."""
    per_upper = {upper: count for _, upper, count in bins}
    buckets = []
    seen = 0.0
    for bound in (*REGRESSION_BOUNDS, None):
        seen += per_upper.get(bound, 0) or 0
        buckets.append(("+Inf" if bound is None else _bound_label(bound), seen))
    return buckets


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
