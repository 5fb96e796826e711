"""``GET /stats`` and ``GET /<api>/stats``: each API's status, counts, latency and tracker, read from the metrics.

Example::

    summary = StatsSummary(metrics, config.apis, status=lambda api: "ready")
    summary.record_prediction("iris", {"class_label": "setosa"})  # 2xx, after post_inference
    summary.api_json("iris")   # the body of GET /iris/stats; stats_json() for GET /stats

One source, ``Metrics.figures()``: the counts are ``localserve_requests_total`` by status class, the mean latency sum /
count of ``localserve_request_duration_seconds``, its p50 and p99 interpolated in its buckets as Prometheus's
``histogram_quantile`` does, the tracker's figures its ``localserve_tracker_*`` metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from localserve.errors import NotFound
from localserve.metrics import ApiFigures, Metrics
from localserve.metrics.tracker import Tracker, histogram

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
        """The value a 2xx response of ``api`` returned (after post_inference); nothing without a tracker (a door whose
        requests have no prediction, V2's, is not ``tracked``: ``Exchange.tracked``)."""
        tracker = self.trackers.get(api)
        if tracker is not None:
            tracker.record(value)

    def stats_json(self) -> list[dict[str, Any]]:
        """The body of ``GET /stats``: every API's figures, added up over all replicas."""
        figures = self.metrics.figures()
        return [self._api_json(name, figures) for name in self.apis]

    def api_json(self, api: str) -> dict[str, Any]:
        """The body of ``GET /<api>/stats``: one API's figures, added up over all replicas."""
        if api not in self.apis:
            raise NotFound(f"No API named '{api}'; the server has: {', '.join(self.apis) or 'no APIs'}.")
        return self._api_json(api, self.metrics.figures())

    def _api_json(self, name: str, every: dict[str, ApiFigures]) -> dict[str, Any]:
        figures = every.get(name) or ApiFigures()
        duration = figures.latency
        latency: dict[str, float | None] = {"mean": None, "p50": None, "p99": None}
        if duration.count:
            latency = {
                "mean": round(duration.sum / duration.count, 9),
                "p50": round(bucket_quantile(0.5, duration.buckets), 9),
                "p99": round(bucket_quantile(0.99, duration.buckets), 9),
            }
        tracker = self.trackers.get(name)
        return {
            "api": name,
            "status": self.status(name),
            "requests": {c: figures.requests(c) for c in STATUS_CLASSES},
            "latency": latency,
            "tracker": None if tracker is None else _tracker_json(tracker, figures),
            **({"models": models_json(figures)} if figures.models else {}),
        }


def models_json(figures: ApiFigures) -> list[dict[str, Any]]:
    """Each model version of a multi-model API: loads, evictions by reason, mean load and call times."""
    out = []
    for (model, version), found in sorted(figures.models.items(), key=lambda item: (item[0][0], int(item[0][1]))):
        load, call = found.load_time, found.latency
        out.append(
            {
                "model": model,
                "version": int(version),
                "loads": int(found.loads),
                "evictions": {reason: int(n) for reason, n in sorted(found.evictions.items())},
                "load_mean": round(load.sum / load.count, 9) if load.count else None,
                "calls": int(call.count),
                "latency_mean": round(call.sum / call.count, 9) if call.count else None,
            }
        )
    return out


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


def _tracker_json(tracker: Tracker, figures: ApiFigures) -> dict[str, Any]:
    if tracker.model_type == "classification":
        classes = {label: int(n) for label, n in figures.classes.items()}
        return {"model_type": "classification", "key": tracker.key, "classes": classes}
    count = int(figures.values.count)
    return {
        "model_type": "regression",
        "key": tracker.key,
        "count": count,
        "min": figures.values_min if count else None,
        "max": figures.values_max if count else None,
        "mean": figures.values_total / count if count else None,
        "histogram": histogram(figures.values.buckets),
    }
