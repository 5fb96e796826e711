"""The phases of each request answered 2xx (``localserve_request_phase_seconds``): what V2's statistics read.

Example::

    observe = phases.observer("iris")
    observe([queued, started, prepared, model_done, finished])   # time.perf_counter() marks

The engine calls the observer once per 2xx its API's threads answer (``Hooks.phases``). The four phases share one count,
as Triton's queue and compute statistics do:

- ``queue``: admitted until one of the API's threads starts it;
- ``prepare``: decoding (V2 tensors, or the payload and ``pre_inference``); an ABEJA handler or a predictor answers
  here;
- ``model``: waiting for its batch, running the model, and its output's way back to a thread;
- ``finish``: ``post_inference`` or V2's encoding.

On a hot path, a lone process adds them up in plain floats under one lock, read at scrape time; replicas observe a
prometheus_client ``Summary`` in phase order, so the last phase's count is never ahead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Summary
from prometheus_client.metrics_core import Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from localserve.metrics.names import PHASE

PHASES = ("queue", "prepare", "model", "finish")
HELP = (
    "Time each request answered 2xx by its API's threads spent queued, preparing (decoding, pre_inference), "
    "in the model (waiting for its batch and running) and finishing (post_inference, encoding)."
)
Observe = Callable[[list[float]], None]


class Phases(Collector):
    """The phase figures of every API of one replica."""

    def __init__(self, registry: CollectorRegistry, *, multiprocess: bool) -> None:
        self._totals: dict[str, _Totals] = {}
        self._summary: Summary | None = None
        if multiprocess:
            self._summary = Summary(PHASE, HELP, ["api", "phase"], registry=registry)
        else:
            registry.register(self)

    def observer(self, api: str) -> Observe:
        """``observe(marks)`` for API ``api``: the request's ``time.perf_counter()`` readings as it was
        queued, started, prepared, had its model's output and was finished. Marks left out at the end
        (a handler that answers in its prepare stage) make those phases 0."""
        if self._summary is not None:
            return _written(self._summary, api)
        totals = self._totals.get(api)
        if totals is None:
            totals = self._totals[api] = _Totals()
        return totals.observe

    def collect(self) -> Iterator[Metric]:
        """The phases as one summary family (a lone process's figures, read at scrape time)."""
        family = SummaryMetricFamily(PHASE, HELP, labels=["api", "phase"])
        for api, totals in list(self._totals.items()):
            with totals.lock:
                count, sums = totals.count, list(totals.sums)
            for phase, total in zip(PHASES, sums, strict=True):
                family.add_metric([api, phase], count_value=count, sum_value=total)
        yield family


class _Totals:
    """One API's count and sums of the phases; the API's threads add to them under ``lock``."""

    __slots__ = ("count", "lock", "sums")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.sums = [0.0, 0.0, 0.0, 0.0]

    def observe(self, marks: list[float]) -> None:
        if len(marks) < 5:
            marks = marks + [marks[-1]] * (5 - len(marks))
        queued, started, prepared, modelled, finished = marks
        sums = self.sums
        with self.lock:
            sums[0] += started - queued
            sums[1] += prepared - started
            sums[2] += modelled - prepared
            sums[3] += finished - modelled
            self.count += 1


def _written(summary: Summary, api: str) -> Observe:
    observers = [summary.labels(api, phase).observe for phase in PHASES]

    def observe(marks: list[float]) -> None:
        end = len(marks) - 1
        for index, record in enumerate(observers):
            record(marks[min(index + 1, end)] - marks[min(index, end)])

    return observe
