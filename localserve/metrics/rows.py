"""The rows of each V2 request answered 2xx (``localserve_request_rows``): what V2's ``inference_count`` reads.

Example::

    rows = RequestRows(metrics._histogram)     # made before the request counter, so collected before it
    iris = rows.of("iris")
    iris.observe(3)                            # a V2 request of 3 rows, answered 2xx
    iris.observe(1, ("a", "2"))                # a request that ran model a version 2 of a multi-model API

The engine observes a request's rows right after its success (``Engine._record``, on the event loop, where
V2's statistics are read too), and a lone process collects the rows before the request counter: no reading
counts the rows of a success it does not count. A histogram, so one child holds both the requests (its count)
and their rows (its sum).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Histogram

from localserve.metrics.buckets import BATCH_BUCKETS
from localserve.metrics.names import ROWS
from localserve.metrics.tallies import TalliedHistograms, TallyHistogram

HELP = (
    "Rows (inferences) of each V2 request answered 2xx: its batch dimension, else 1; model and version "
    "name the model version of a multi-model API that ran it (empty for the API's own model)."
)
Family = Histogram | TalliedHistograms
Child = Histogram | TallyHistogram


class RequestRows:
    """The family, made by ``histogram`` (``Metrics._histogram``: tallied alone, prometheus_client's with replicas)."""

    def __init__(self, histogram: Callable[[str, str, list[str], tuple[float, ...]], Family]) -> None:
        self.family = histogram(ROWS, HELP, ["api", "model", "version"], BATCH_BUCKETS)

    def of(self, api: str) -> ApiRows:
        """The children of API ``api``."""
        return ApiRows(self.family, api)


class ApiRows:
    """One API's rows: its own model's child, made at once, and each model version's, made on first use."""

    __slots__ = ("api", "family", "own", "versions")

    def __init__(self, family: Family, api: str) -> None:
        self.family = family
        self.api = api
        self.own: Child = family.labels(api, "", "")
        self.versions: dict[tuple[str, str], Child] = {}

    def observe(self, rows: int = 1, ran: tuple[str, str] | None = None) -> None:
        """A request of ``rows`` rows answered 2xx; ``ran``: the (model, version) of a multi-model API that ran it."""
        if ran is None:
            self.own.observe(rows)
            return
        child = self.versions.get(ran)
        if child is None:
            child = self.versions[ran] = self.family.labels(self.api, *ran)
        child.observe(rows)
