"""Prometheus metrics for ``GET /metrics``, per API, right across replicas; and Cortex's ``metrics_client``.

Example::

    metrics = Metrics(apis=["iris"])
    metrics.request_started("iris")
    metrics.request_finished("iris", 200, 0.0012)
    body, headers = metrics.render(accept="application/openmetrics-text", accept_encoding="gzip")

Every figure is a prometheus_client metric (public API only), but those every request adds to in a lone process, which
are plain numbers collected at scrape time as the same families (``tallies.py``, ``phases.py``; the request counter,
the duration, stage, batch-size and rows histograms, the phases). With replicas, prometheus_client's multiprocess mode
adds them up: the supervisor gives each serve a fresh ``PROMETHEUS_MULTIPROC_DIR``, and ``Metrics(directory=...)``
reads every replica's files on ``render()``. ``/stats``, ``localserve get``, the dashboard and V2's statistics derive
from these figures through one reader (``localserve.metrics.figures``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client import multiprocess as _multiprocess
from prometheus_client.metrics_core import Metric

from localserve.metrics.buckets import BATCH_BUCKETS, DURATION_BUCKETS
from localserve.metrics.exposition import ReplicaProcesses, expose
from localserve.metrics.figures import ApiFigures, Distribution, read_figures
from localserve.metrics.folder import MULTIPROC_ENV, check_multiprocess_dir, mark_process_dead, prepare_metrics_dir
from localserve.metrics.models import ModelMetrics
from localserve.metrics.names import (
    BATCH_SIZE,
    DURATION,
    IN_FLIGHT,
    MODEL_LOAD,
    QUEUE_DEPTH,
    REQUESTS,
    STAGE,
    TRACKER_CLASS,
    TRACKER_MAX,
    TRACKER_MIN,
    TRACKER_TOTAL,
    TRACKER_VALUE,
)
from localserve.metrics.phases import PHASES, Phases
from localserve.metrics.rows import RequestRows
from localserve.metrics.tallies import TalliedCounters, TalliedHistograms, TallyCounter, TallyHistogram
from localserve.metrics.tracker import REGRESSION_BOUNDS
from localserve.metrics.user import USER_BUCKETS, USER_PREFIX, MetricsClient, UserMetrics

__all__ = [
    "BATCH_BUCKETS",
    "DURATION_BUCKETS",
    "MULTIPROC_ENV",
    "PHASES",
    "STAGES",
    "USER_BUCKETS",
    "USER_PREFIX",
    "ApiFigures",
    "ApiMetrics",
    "Distribution",
    "Metrics",
    "MetricsClient",
    "check_multiprocess_dir",
    "expose",
    "mark_process_dead",
    "prepare_metrics_dir",
    "read_figures",
]

STAGES = ("pre_inference", "inference", "post_inference", "handler", "predict", "post_predict", "load_model")

# No `*_created` series: they double the page, Prometheus ignores them and prometheus_client cannot add them
# up across replicas. This is prometheus_client's switch for the whole process, user code's metrics included.
disable_created_metrics()  # type: ignore[no-untyped-call]


class ApiMetrics:
    """The prometheus_client children of one API, made once: a request pays no ``labels()`` look-up."""

    __slots__ = ("batch_size", "codes", "duration", "in_flight", "model_load", "name", "queue_depth", "rows", "stages")

    def __init__(self, metrics: Metrics, name: str) -> None:
        self.name = name
        self.in_flight = metrics.in_flight.labels(name)
        self.queue_depth = metrics.queue_depth.labels(name)
        self.duration = metrics.duration.labels(name)
        self.batch_size = metrics.batch_size.labels(name)
        self.model_load = metrics.model_load.labels(name)
        self.rows = metrics.rows.of(name)  # the engine's, with each success (Triton's inference_count)
        self.codes: dict[int, Counter | TallyCounter] = {}
        self.stages: dict[str, Histogram | TallyHistogram] = {}


class Metrics:
    """The metrics of one replica process; the server owns one and calls it once or twice per request.

    ``directory``: the multiprocess folder of a serve with replicas (prometheus_client must have been
    imported with ``PROMETHEUS_MULTIPROC_DIR`` set to it); ``None``: this process's figures only.
    """

    def __init__(self, apis: Iterable[str] = (), *, directory: str | None = None) -> None:
        self.directory = directory
        self.registry = registry = CollectorRegistry()
        self.rows = RequestRows(self._histogram)  # before the request counter: collected before it
        self.requests = self._counter(REQUESTS, "Requests answered, by status code.", ["api", "code"])
        self.duration = self._histogram(
            DURATION, "Time from request received to response ready.", ["api"], DURATION_BUCKETS
        )
        self.stage = self._histogram(
            STAGE,
            "Time spent in each stage of a request (pre_inference, inference, post_inference, handler, predict, "
            "post_predict, load_model).",
            ["api", "stage"],
            DURATION_BUCKETS,
        )
        self.in_flight = Gauge(
            IN_FLIGHT, "Requests being served.", ["api"], multiprocess_mode="livesum", registry=registry
        )
        self.queue_depth = Gauge(
            QUEUE_DEPTH,
            "Requests waiting for a worker thread.",
            ["api"],
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.batch_size = self._histogram(BATCH_SIZE, "Samples per model call.", ["api"], BATCH_BUCKETS)
        self.model_load = Gauge(
            MODEL_LOAD,
            "Time taken to load the API (slowest live replica).",
            ["api"],
            multiprocess_mode="livemax",
            registry=registry,
        )
        self._define_tracker(registry)
        self.models = ModelMetrics(registry, DURATION_BUCKETS)  # the models of multi-model APIs
        self._user = UserMetrics(registry)
        self._phases = Phases(registry, multiprocess=directory is not None)
        self.apis: dict[str, ApiMetrics] = {}
        for api in apis:
            self.api(api)
        self._scrape: CollectorRegistry = registry
        self._system = CollectorRegistry()  # on /metrics only: figures() has no use for them
        PlatformCollector(registry=self._system)
        if directory is None:
            ProcessCollector(registry=self._system)
        else:
            self._scrape = CollectorRegistry()
            _multiprocess.MultiProcessCollector(self._scrape, path=directory)  # type: ignore[no-untyped-call]
            self._system.register(ReplicaProcesses(directory))

    # The families every request adds to: tallied alone (``tallies.py``), prometheus_client's with replicas.
    def _counter(self, name: str, doc: str, labels: list[str]) -> Counter | TalliedCounters:
        if self.directory is not None:
            return Counter(name, doc, labels, registry=self.registry)
        family = TalliedCounters(name, doc, labels)
        self.registry.register(family)
        return family

    def _histogram(
        self, name: str, doc: str, labels: list[str], buckets: tuple[float, ...]
    ) -> Histogram | TalliedHistograms:
        if self.directory is not None:
            return Histogram(name, doc, labels, buckets=buckets, registry=self.registry)
        family = TalliedHistograms(name, doc, labels, buckets)
        self.registry.register(family)
        return family

    def _define_tracker(self, registry: CollectorRegistry) -> None:
        """Cortex's tracker (``tracker.py``): classes counted, values as a fixed-bin histogram, min, max, sum."""
        self.tracker_class = Counter(
            TRACKER_CLASS, "Tracker: predictions of each class (classification).", ["api", "class"], registry=registry
        )
        self.tracker_value = Histogram(
            TRACKER_VALUE,
            "Tracker: predicted values (regression).",
            ["api"],
            buckets=REGRESSION_BOUNDS,
            registry=registry,
        )
        self.tracker_min = Gauge(
            TRACKER_MIN, "Tracker: smallest predicted value.", ["api"], multiprocess_mode="min", registry=registry
        )
        self.tracker_max = Gauge(
            TRACKER_MAX, "Tracker: largest predicted value.", ["api"], multiprocess_mode="max", registry=registry
        )
        self.tracker_total = Gauge(
            TRACKER_TOTAL, "Tracker: sum of the predicted values.", ["api"], multiprocess_mode="sum", registry=registry
        )

    def api(self, name: str) -> ApiMetrics:
        """The children of API ``name`` (made on first use)."""
        children = self.apis.get(name)
        if children is None:
            children = self.apis[name] = ApiMetrics(self, name)
        return children

    def request_started(self, api: str) -> None:
        """A request of ``api`` was admitted."""
        self.api(api).in_flight.inc()

    def request_finished(self, api: str, status_code: int, seconds: float) -> None:
        """A request started with ``request_started`` was answered with ``status_code`` after ``seconds``."""
        children = self.api(api)
        children.in_flight.dec()
        self.count(children, status_code, seconds)

    def count(self, children: ApiMetrics, status_code: int, seconds: float, trace_id: str | None = None) -> None:
        """One answer of ``status_code`` after ``seconds``: the request counter and the latency histogram (a traced
        request's ``trace_id`` as its exemplar: OpenMetrics shows it)."""
        counter = children.codes.get(status_code)
        if counter is None:
            counter = children.codes[status_code] = self.requests.labels(children.name, str(status_code))
        counter.inc()
        children.duration.observe(seconds, None if trace_id is None else {"trace_id": trace_id})

    def observe_stage(self, api: str, stage: str, seconds: float) -> None:
        """One stage of a request (see ``STAGES``) took ``seconds``."""
        children = self.api(api)
        histogram = children.stages.get(stage)
        if histogram is None:
            histogram = children.stages[stage] = self.stage.labels(api, stage)
        histogram.observe(seconds)

    def stage_observer(self, api: str) -> Callable[[str, float], None]:
        """``observe_stage`` for one API, for the hot path: each stage's ``observe`` is looked up once.

        A stage's series appears on first use, as with ``observe_stage``.
        """
        observers: dict[str, Callable[[float], None]] = {}

        def observe(stage: str, seconds: float) -> None:
            found = observers.get(stage)
            if found is None:
                self.observe_stage(api, stage, seconds)
                observers[stage] = self.api(api).stages[stage].observe
                return
            found(seconds)

        return observe

    def phase_observer(self, api: str) -> Callable[[list[float]], None]:
        """For the engine: ``observe(marks)`` once per request of ``api`` answered 2xx (``localserve.metrics.phases``)."""
        return self._phases.observer(api)

    @property
    def multiprocess(self) -> bool:
        """Whether values must be written as they change (replicas); alone, gauges are read at scrape time."""
        return self.directory is not None

    def read_live(self, api: str, in_flight: Callable[[], float], queue_depth: Callable[[], float]) -> None:
        """Alone: the in-flight and queue gauges of ``api`` are read from these at each scrape, so a
        request pays nothing for them (prometheus_client's ``set_function``). Not for replicas."""
        children = self.api(api)
        children.in_flight.set_function(in_flight)
        children.queue_depth.set_function(queue_depth)

    def set_queue_depth(self, api: str, n: int) -> None:
        """``n`` requests of ``api`` wait for a worker thread in this replica."""
        self.api(api).queue_depth.set(n)

    def observe_batch(self, api: str, size: int) -> None:
        """The model of ``api`` ran once on ``size`` samples."""
        self.api(api).batch_size.observe(size)

    def observe_model_load(self, api: str, seconds: float) -> None:
        """Loading ``api`` (model and user code) took ``seconds``."""
        self.api(api).model_load.set(seconds)

    def client(self, api: str) -> MetricsClient:
        """The ``metrics_client`` handed to the predictors of ``api``."""
        return MetricsClient(self._user, api)

    def collect(self) -> list[Metric]:
        """Every metric family, all replicas' figures added up in multiprocess mode."""
        return list(self._scrape.collect())

    def figures(self) -> dict[str, ApiFigures]:
        """Every API's figures, read once from ``collect()`` (``read_figures``): what every view derives from."""
        return read_figures(self.collect())

    def families(self) -> list[Metric]:
        """What ``GET /metrics`` shows: ``collect()`` and the process's (every replica's) and platform's figures."""
        return [*self._scrape.collect(), *self._system.collect()]

    def render(self, accept: str = "", accept_encoding: str = "") -> tuple[bytes, dict[str, str]]:
        """The body and headers of ``GET /metrics`` (``expose``); all replicas' figures in multiprocess mode."""
        return expose(self.families(), accept, accept_encoding)
