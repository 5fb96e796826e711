"""The request counter and the hot histograms of a lone process: plain numbers under a lock, read at scrape time.

Example::

    duration = TalliedHistograms(DURATION, "Time from request received to response ready.", ["api"], DURATION_BUCKETS)
    registry.register(duration)
    duration.labels("iris").observe(0.0012)    # what prometheus_client's Histogram child offers

prometheus_client's ``Histogram.observe`` takes two locks and makes half a dozen calls, and every request observes
several; alone, these are added up here for a fraction of that, and the families are made when scraped with the same
names, labels, buckets and samples (``tests/metrics/test_tallies.py`` compares the texts). Replicas keep
prometheus_client's classes, whose multiprocess files add every replica's figures up.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

_le = cast(Callable[[float], str], floatToGoString)  # how prometheus_client writes a bucket's bound


class TallyCounter:
    """One counter of a family (its labels' values): ``inc`` as prometheus_client's."""

    __slots__ = ("lock", "value")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        with self.lock:
            self.value += amount


class TallyHistogram:
    """One histogram of a family: ``observe`` as prometheus_client's (a value on a bound counts in its bucket),
    with the last exemplar of each bucket (OpenMetrics; a traced request's ``trace_id``)."""

    __slots__ = ("bounds", "counts", "exemplars", "lock", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.lock = threading.Lock()
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf's
        self.total = 0.0
        self.exemplars: list[Exemplar | None] | None = None  # made on the first exemplar

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        index = bisect_left(self.bounds, amount)
        with self.lock:
            self.counts[index] += 1
            self.total += amount
        if exemplar is not None:
            if self.exemplars is None:
                self.exemplars = [None] * len(self.counts)
            self.exemplars[index] = Exemplar(exemplar, amount, time.time())


Child = TypeVar("Child", TallyCounter, TallyHistogram)


class _Tallied(Collector, Generic[Child]):
    """A family whose children ``labels`` makes on first use."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        self._children: dict[tuple[str, ...], Child] = {}
        self._lock = threading.Lock()

    def labels(self, *values: str) -> Child:
        """The child of these label values (made once; a request looks it up no more)."""
        child = self._children.get(values)
        if child is None:
            with self._lock:
                child = self._children.get(values)
                if child is None:
                    child = self._children[values] = self._child()
        return child

    def _child(self) -> Child:
        raise NotImplementedError

    def _current(self) -> list[tuple[list[str], Child]]:
        return [(list(values), child) for values, child in list(self._children.items())]


class TalliedCounters(_Tallied[TallyCounter]):
    """A counter family: written as prometheus_client's ``Counter`` (its ``_total`` samples)."""

    def _child(self) -> TallyCounter:
        return TallyCounter()

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self._current():
            with child.lock:
                value = child.value
            family.add_metric(values, value)
        yield family


class TalliedHistograms(_Tallied[TallyHistogram]):
    """A histogram family: written as prometheus_client's ``Histogram`` (cumulative buckets, ``_count``, ``_sum``)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]) -> None:
        super().__init__(name, documentation, labelnames)
        self.bounds = tuple(float(b) for b in buckets if b != float("inf"))

    def _child(self) -> TallyHistogram:
        return TallyHistogram(self.bounds)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        edges = [*(_le(b) for b in self.bounds), "+Inf"]
        for values, child in self._current():
            with child.lock:
                counts, total = list(child.counts), child.total
            exemplars = child.exemplars or [None] * len(counts)
            cumulative: list[Any] = []
            running = 0.0
            for edge, count, exemplar in zip(edges, counts, exemplars, strict=True):
                running += count
                cumulative.append((edge, running) if exemplar is None else (edge, running, exemplar))
            family.add_metric(values, cumulative, total)
        yield family
