"""Cortex's prediction tracker and the request stats of one API in one process (see ``stats.py``).

Both keep a JSON-able ``state()`` made of sums and fixed buckets, so the states of several
replicas add up exactly.
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
from collections.abc import Mapping
from typing import Any

MODEL_TYPES = ("classification", "regression")

logger = logging.getLogger("localserve")

# Latency buckets: 20 per decade from 10 µs to 1000 s, each ~12% wide, keeping count and sum; a quantile
# is the mean of the bucket it falls in (exact when that bucket's values are equal, else within ~12%).
# The buckets are fixed, so those of several processes add up.
_LOW = 1e-5
_PER_DECADE = 20
_N_BUCKETS = 8 * _PER_DECADE + 1
_SCALE = _PER_DECADE / math.log(10)


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
        with self._lock:
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
            }


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
