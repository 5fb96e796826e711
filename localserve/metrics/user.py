"""Cortex's ``metrics_client``: metrics that predictors make, exported as ``localserve_user_<name>``."""

from __future__ import annotations

import logging
import math
import numbers
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

logger = logging.getLogger("localserve")

USER_BUCKETS = tuple(m * 10.0**e for e in range(-3, 6) for m in (1.0, 2.5, 5.0))
USER_PREFIX = "localserve_user_"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KINDS = {"gauge": "gauge", "put": "gauge", "increment": "counter", "histogram": "histogram"}
# Cortex's MetricsClient (cortex_internal/lib/metrics.py, v0.30+) refused these, raising into the predictor.
RESERVED_PREFIXES = ("cortex_", "istio_")


class _UserMetric:
    __slots__ = ("kind", "labelnames", "metric")

    def __init__(self, kind: str, labelnames: tuple[str, ...], metric: Any) -> None:
        self.kind = kind
        self.labelnames = labelnames
        self.metric = metric


class UserMetrics:
    """The metrics made through ``MetricsClient``s of one process, shared by all APIs."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._metrics: dict[str, _UserMetric] = {}
        self._children: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], Any] = {}
        self._lock = threading.Lock()

    def record(self, method: str, api: str, name: Any, value: Any, tags: Any) -> None:
        """One call of the user's metrics client (gauge / put / increment / histogram) as ``localserve_user_<name>``."""
        kind = _KINDS[method]
        try:
            child = self._child(kind, api, name, value, tags)
            if kind == "gauge":
                child.set(value)
            elif kind == "counter":
                child.inc(value)
            else:
                child.observe(value)
        except _UserMetricError as exc:
            logger.error("metrics_client.%s(%r): %s", method, name, exc)
        except Exception as exc:  # a metrics call never fails the user's request
            logger.error("metrics_client.%s(%r) failed: %s", method, name, exc)

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
        doc = f"User metric {name!r} (a {kind} of metrics_client)."
        try:
            if kind == "gauge":
                return Gauge(full_name, doc, labelnames, registry=self._registry, multiprocess_mode="mostrecent")
            if kind == "counter":
                return Counter(full_name, doc, labelnames, registry=self._registry)
            return Histogram(full_name, doc, labelnames, buckets=USER_BUCKETS, registry=self._registry)
        except ValueError as exc:  # its series would clash with another metric's (e.g. "x_count" and histogram "x")
            raise _UserMetricError(str(exc)) from None


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


def check_metric_name(metric: Any) -> None:
    """Raise Cortex's own error for a name with one of its reserved prefixes (as its client did, word for word)."""
    if isinstance(metric, str) and metric.startswith(RESERVED_PREFIXES):
        raise ValueError(
            f"Metric name ({metric}) is invalid because it starts with a cortex exclusive prefix.\n"
            f"The following are prefixes are exclusive to cortex: {RESERVED_PREFIXES}."
        )


def _metric_argument(method: str, metric: Any, metric_name: Any) -> Any:
    if (metric is None) == (metric_name is None):
        raise TypeError(f"metrics_client.{method}() takes the metric's name once, as 'metric' or 'metric_name'")
    name = metric if metric is not None else metric_name
    check_metric_name(name)
    return name


def _recorder(method: str, doc: str, default: float | None = None) -> Callable[..., None]:
    """One method of ``MetricsClient``: Cortex's signature, plus localserve's earlier keyword ``metric_name``."""

    def record(
        self: MetricsClient,
        metric: str | None = None,
        value: float | None = default,
        tags: Mapping[str, Any] | None = None,
        *,
        metric_name: str | None = None,
    ) -> None:
        self._user.record(method, self._api, _metric_argument(method, metric, metric_name), value, tags)

    record.__name__ = record.__qualname__ = method
    record.__doc__ = doc
    return record


class MetricsClient:
    """Cortex's ``metrics_client`` for predictors; a metric ``name`` is exported as ``localserve_user_<name>``.

    Cortex's calls (v0.30+): ``gauge``, ``increment`` and ``histogram`` (``metric, value, tags``), tags as labels beside
    ``api``; ``put`` and the keyword ``metric_name`` still work. A name starting with ``cortex_`` or ``istio_`` raises
    Cortex's ``ValueError``; other mistakes are logged as errors, never raised into the predictor.
    """

    def __init__(self, user_metrics: UserMetrics, api: str) -> None:
        self._user = user_metrics
        self._api = api

    gauge = _recorder("gauge", "Set the gauge ``metric`` to ``value`` (a Prometheus Gauge).")
    put = _recorder("put", "``gauge``, under localserve's earlier name.")
    increment = _recorder(
        "increment", "Add ``value`` to the counter ``metric`` (a Prometheus Counter, exported with ``_total``).", 1
    )
    histogram = _recorder("histogram", "Observe ``value`` in the histogram ``metric`` (a Prometheus Histogram).")
