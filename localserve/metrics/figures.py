"""Every API's figures, read from the metrics in one pass: the one reader of localserve's figures.

Example::

    figures = read_figures(metrics.collect())   # prometheus_client's public API, all replicas
    iris = figures.get("iris") or ApiFigures()
    iris.requests("2xx"), iris.latency.count, iris.stages["inference"].sum

``GET /stats`` (so ``localserve get``), the dashboard and V2's statistics all derive from this one function over
``Metrics.collect()``; nothing reads the ``/metrics`` text back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric

from localserve.metrics.names import (
    BATCH_SIZE,
    DURATION,
    IN_FLIGHT,
    MODEL_DURATION,
    MODEL_EVICTIONS,
    MODEL_LOAD,
    MODEL_LOAD_DURATION,
    MODEL_LOADS,
    PHASE,
    QUEUE_DEPTH,
    REQUESTS,
    ROWS,
    STAGE,
    TRACKER_CLASS,
    TRACKER_MAX,
    TRACKER_MIN,
    TRACKER_TOTAL,
    TRACKER_VALUE,
)


@dataclass
class Distribution:
    """A histogram's (or a summary's) figures: count, sum and, for a histogram, its buckets."""

    buckets: list[tuple[float, float]] = field(default_factory=list)  # (upper bound, cumulative count), +Inf last
    count: float = 0.0
    sum: float = 0.0


@dataclass
class VersionFigures:
    """One model version of a multi-model API: loads, evictions by reason, load and call times, and the rows of the
    requests answered 2xx that named it (V2's)."""

    loads: float = 0.0
    evictions: dict[str, float] = field(default_factory=dict)
    load_time: Distribution = field(default_factory=Distribution)
    latency: Distribution = field(default_factory=Distribution)
    rows: Distribution = field(default_factory=Distribution)  # count: those requests; sum: their rows


@dataclass
class ApiFigures:
    """What the metrics hold for one API (every replica's figures added up)."""

    codes: dict[str, float] = field(default_factory=dict)  # requests answered, by status code ("200")
    in_flight: float = 0.0
    queue_depth: float = 0.0
    model_load: float = 0.0  # seconds
    latency: Distribution = field(default_factory=Distribution)  # request durations, seconds
    batch_size: Distribution = field(default_factory=Distribution)  # samples per model call
    rows: Distribution = field(default_factory=Distribution)  # per request answered 2xx (none of a model version's)
    stages: dict[str, Distribution] = field(default_factory=dict)  # pre_inference, inference, ...: seconds
    phases: dict[str, Distribution] = field(default_factory=dict)  # queue, prepare, model, finish: seconds
    classes: dict[str, float] = field(default_factory=dict)  # the tracker's classes (classification)
    values: Distribution = field(default_factory=Distribution)  # the tracker's values (regression), no sum
    values_total: float = 0.0
    values_min: float | None = None
    values_max: float | None = None
    models: dict[tuple[str, str], VersionFigures] = field(default_factory=dict)  # (model, version): its figures

    def requests(self, status_class: str) -> int:
        """Requests answered with a status of ``status_class`` ("2xx", "4xx", "5xx")."""
        first = status_class[0]
        return int(sum(n for code, n in self.codes.items() if code[:1] == first))


def read_figures(families: Iterable[Metric]) -> dict[str, ApiFigures]:
    """Every API's figures from the metric families of ``Metrics.collect()``, keyed by API name."""
    apis: dict[str, ApiFigures] = {}
    for family in families:
        read = _READ.get(family.name)
        if read is None:
            continue
        for sample in family.samples:
            api = sample.labels.get("api")
            if api is None:
                continue
            figures = apis.get(api)
            if figures is None:
                figures = apis[api] = ApiFigures()
            read(figures, sample.name[len(family.name) :], sample.labels, sample.value)
    for figures in apis.values():
        versions = figures.models.values()
        for distribution in (
            figures.latency,
            figures.batch_size,
            figures.rows,
            figures.values,
            *figures.stages.values(),
            *(v.latency for v in versions),
            *(v.load_time for v in versions),
            *(v.rows for v in versions),
        ):
            distribution.buckets.sort()
    return apis


def _add(distribution: Distribution, suffix: str, labels: dict[str, str], value: float) -> None:
    if suffix == "_bucket":
        distribution.buckets.append((float(labels["le"]), value))
    elif suffix == "_count":
        distribution.count += value
    elif suffix == "_sum":
        distribution.sum += value


def _requests(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
    if suffix == "_total":
        figures.codes[labels["code"]] = figures.codes.get(labels["code"], 0.0) + value


def _labelled(attribute: str, label: str) -> Callable[[ApiFigures, str, dict[str, str], float], None]:
    def read(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
        by_label: dict[str, Distribution] = getattr(figures, attribute)
        key = labels[label]
        distribution = by_label.get(key)
        if distribution is None:
            distribution = by_label[key] = Distribution()
        _add(distribution, suffix, labels, value)

    return read


def _distribution(attribute: str) -> Callable[[ApiFigures, str, dict[str, str], float], None]:
    def read(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
        _add(getattr(figures, attribute), suffix, labels, value)

    return read


def _value(attribute: str) -> Callable[[ApiFigures, str, dict[str, str], float], None]:
    def read(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
        setattr(figures, attribute, value)

    return read


def _classes(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
    if suffix == "_total":
        figures.classes[labels["class"]] = figures.classes.get(labels["class"], 0.0) + value


def _version(figures: ApiFigures, labels: dict[str, str]) -> VersionFigures:
    key = (labels["model"], labels["version"])
    found = figures.models.get(key)
    if found is None:
        found = figures.models[key] = VersionFigures()
    return found


def _model_loads(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
    if suffix == "_total":
        _version(figures, labels).loads += value


def _model_evictions(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
    if suffix == "_total":
        evictions = _version(figures, labels).evictions
        evictions[labels["reason"]] = evictions.get(labels["reason"], 0.0) + value


def _model_distribution(attribute: str) -> Callable[[ApiFigures, str, dict[str, str], float], None]:
    def read(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
        _add(getattr(_version(figures, labels), attribute), suffix, labels, value)

    return read


def _rows(figures: ApiFigures, suffix: str, labels: dict[str, str], value: float) -> None:
    target = figures.rows if not labels.get("model") else _version(figures, labels).rows
    _add(target, suffix, labels, value)


# Family name → how its samples are read (the sample name's suffix after the family's name: "_total",
# "_bucket", "_count", "_sum", or "" for a gauge).
_READ: dict[str, Callable[[ApiFigures, str, dict[str, str], float], None]] = {
    REQUESTS: _requests,
    DURATION: _distribution("latency"),
    BATCH_SIZE: _distribution("batch_size"),
    ROWS: _rows,
    STAGE: _labelled("stages", "stage"),
    PHASE: _labelled("phases", "phase"),
    IN_FLIGHT: _value("in_flight"),
    QUEUE_DEPTH: _value("queue_depth"),
    MODEL_LOAD: _value("model_load"),
    TRACKER_CLASS: _classes,
    TRACKER_VALUE: _distribution("values"),
    TRACKER_TOTAL: _value("values_total"),
    TRACKER_MIN: _value("values_min"),
    TRACKER_MAX: _value("values_max"),
    MODEL_LOADS: _model_loads,
    MODEL_EVICTIONS: _model_evictions,
    MODEL_LOAD_DURATION: _model_distribution("load_time"),
    MODEL_DURATION: _model_distribution("latency"),
}
