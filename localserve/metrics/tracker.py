"""Cortex's prediction tracker: the class distribution or the regression figures of what an API returns.

Its figures are prometheus_client metrics of the replica's ``Metrics`` (``localserve_tracker_*``),
so they add up over replicas like every other figure, and ``/stats`` reads them back
(``localserve.metrics.summary``).
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import Counter, Gauge, Histogram

MODEL_TYPES = ("classification", "regression")

# The regression histogram's bins are fixed, not adapted to the values seen, so that the bins of
# several replicas add up and a Prometheus scrape sees the same buckets every time: 0 and
# ±{1, 2, 5}·10^k for k in -3..5, and ±10^6; a bin holds the values in (lower bound, upper bound];
# values beyond ±10^6 fall in the two outer bins. /stats and the dashboard show the bins that hold a
# value, lowest first (the dashboard marks empty bins between two with a gap).
_STEPS = tuple(float(f"{m}e{k}") for k in range(-3, 6) for m in (1, 2, 5)) + (1e6,)
REGRESSION_BOUNDS: tuple[float, ...] = (*sorted(-s for s in _STEPS), 0.0, *_STEPS)

logger = logging.getLogger("localserve")


class TrackerMetrics(Protocol):
    """Where a tracker counts: the replica's ``localserve.metrics.Metrics`` has these."""

    tracker_class: Counter
    tracker_value: Histogram
    tracker_min: Gauge
    tracker_max: Gauge
    tracker_total: Gauge


class Tracker:
    """Cortex's ``tracker``: the class distribution or the regression stats of what an API returns."""

    def __init__(self, api: str, model_type: str, key: str | None, metrics: TrackerMetrics) -> None:
        if model_type not in MODEL_TYPES:
            raise ValueError(f"tracker model_type must be 'classification' or 'regression', got {model_type!r}")
        self.api = api
        self.model_type = model_type
        self.key = key
        self._metrics = metrics
        self._lock = threading.Lock()  # min and max: read, compare, write
        self._min = math.inf
        self._max = -math.inf

    def record(self, value: Any) -> None:
        """Track the value a 2xx response returned (after post_inference); a wrong value is a warning."""
        try:
            self._record(value)
        except Exception as exc:  # the tracker never fails a request
            logger.warning("tracker of api '%s': could not track %s: %s", self.api, _describe(value), exc)

    def _record(self, value: Any) -> None:
        found = self._tracked(value)
        if found is None:
            return
        value, what = found
        if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
            value = value.item()  # a 0-d numpy array
        if self.model_type == "classification":
            self._classify(value, what)
        else:
            self._regress(value, what)

    def _tracked(self, value: Any) -> tuple[Any, str] | None:
        """The value to track (the response, or its ``key``) and its name for warnings; None after a warning."""
        if self.key is not None:
            if not isinstance(value, Mapping):
                self._warn(f"expected a JSON object holding '{self.key}', got {_describe(value)}")
                return None
            if self.key not in value:
                keys = ", ".join(repr(k) for k in list(value)[:10])
                self._warn(f"the response has no key '{self.key}' (its keys: {keys or 'none'})")
                return None
            return value[self.key], f"'{self.key}'"
        if isinstance(value, Mapping):
            self._warn("the response is a JSON object; set 'key' in 'tracker' to the field to track")
            return None
        return value, "the response"

    def _classify(self, value: Any, what: str) -> None:
        if isinstance(value, str):
            label = str(value)
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
            label = str(int(value))
        else:
            self._warn(f"{what} must be an int or a str for classification, got {_describe(value)}")
            return
        self._metrics.tracker_class.labels(self.api, label).inc()

    def _regress(self, value: Any, what: str) -> None:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            self._warn(f"{what} must be a finite number for regression, got {_describe(value)}")
            return
        number = float(value)
        metrics = self._metrics
        metrics.tracker_value.labels(self.api).observe(number)
        metrics.tracker_total.labels(self.api).inc(number)
        with self._lock:
            if number < self._min:
                self._min = number
                metrics.tracker_min.labels(self.api).set(number)
            if number > self._max:
                self._max = number
                metrics.tracker_max.labels(self.api).set(number)

    def _warn(self, message: str) -> None:
        logger.warning("tracker of api '%s': %s", self.api, message)


def histogram(cumulative: Sequence[tuple[float, float]]) -> list[list[float | int | None]]:
    """The non-empty bins of a Prometheus histogram's ``(upper bound, cumulative count)`` buckets, +Inf last.

    As ``[[lower, upper, count], ...]``, lowest first; a bin holds the values in (lower, upper];
    ``None`` stands for -inf / +inf (JSON has no infinity).
    """
    bins: list[list[float | int | None]] = []
    lower: float | None = None
    below = 0.0
    for upper, seen in cumulative:
        if seen > below:
            bins.append([lower, None if math.isinf(upper) else upper, int(seen - below)])
        lower, below = upper, seen
    return bins


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
