"""Prometheus metrics for ``GET /metrics``, per API, right across replicas; and Cortex's ``metrics_client``.

Example::

    metrics = Metrics(apis=["iris"])
    metrics.request_started("iris")
    metrics.request_finished("iris", 200, 0.0012)
    body, content_type = metrics.render()

With ``LOCALSERVE_METRICS_DIR`` set (the supervisor sets it to one fresh folder for all replicas),
every process writes its figures to files there and ``render()`` adds them up (prometheus_client's
multiprocess mode); without it the figures live in this process only.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Iterable

METRICS_DIR_ENV = "LOCALSERVE_METRICS_DIR"
_PROMETHEUS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def _metrics_dir() -> str | None:
    directory = os.environ.get(METRICS_DIR_ENV) or None
    if directory is not None:
        os.environ[_PROMETHEUS_DIR_ENV] = directory
    return directory


# prometheus_client chooses between in-process and file-backed values when it is imported, so the
# directory must be in its environment variable before the submodules below import it.
_metrics_dir()

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest  # noqa: E402

from localserve.metrics.multiprocess import (  # noqa: E402
    MultiprocessWriter,
    mark_process_dead,
    prepare_metrics_dir,
    render_directory,
)
from localserve.metrics.state import (  # noqa: E402
    BATCH_BOUNDS,
    BATCH_BUCKETS,
    DURATION_BOUNDS,
    DURATION_BUCKETS,
    STAGES,
    ApiState,
    CodeSeries,
    PlainHistogram,
    StageSeries,
    StateCollector,
)
from localserve.metrics.user import USER_BUCKETS, USER_PREFIX, MetricsClient, UserMetrics  # noqa: E402

__all__ = [
    "BATCH_BUCKETS",
    "DURATION_BUCKETS",
    "METRICS_DIR_ENV",
    "STAGES",
    "USER_BUCKETS",
    "USER_PREFIX",
    "Metrics",
    "MetricsClient",
    "mark_process_dead",
    "prepare_metrics_dir",
]

logger = logging.getLogger("localserve")


class Metrics:
    """The metrics of one replica process; the server owns one and calls it once or twice per request.

    The hot-path methods only update plain Python figures (see ``ApiState``). Alone, the process
    exports them through a collector when ``render()`` is called; in multiprocess mode a background
    thread adds them to prometheus_client's shared files every ``FLUSH_INTERVAL`` seconds, and
    ``render()``, ``close()`` and the interpreter's exit flush what is left.
    """

    FLUSH_INTERVAL = 0.5

    def __init__(self, apis: Iterable[str] = ()) -> None:
        self.directory = _metrics_dir()
        self._registry = CollectorRegistry()
        self._apis: dict[str, ApiState] = {}
        self._lock = threading.Lock()
        # Series in the order they appeared, as prometheus_client lists its children.
        self._code_series: CodeSeries = []
        self._stage_series: StageSeries = []
        self._writer: MultiprocessWriter | None = None
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if self.directory is None:
            self._registry.register(StateCollector(self._apis, self._code_series, self._stage_series))
        else:
            self._writer = MultiprocessWriter(self._registry)
        self._user = UserMetrics(self._registry)
        for api in apis:
            self._api(api)
        if self.directory is not None:
            atexit.register(self.flush)
            self._flusher = threading.Thread(target=self._flush_every, name="localserve-metrics", daemon=True)
            self._flusher.start()

    def _api(self, api: str) -> ApiState:
        state = self._apis.get(api)
        if state is None:
            with self._lock:
                state = self._apis.get(api)
                if state is None:
                    if self._writer is not None:
                        self._writer.add_api(api)
                    state = self._apis[api] = ApiState()
        return state

    def request_started(self, api: str) -> None:
        """A request of ``api`` was admitted."""
        state = self._apis.get(api) or self._api(api)
        with state.lock:
            state.in_flight += 1

    def request_finished(self, api: str, status_code: int, seconds: float) -> None:
        """A request started with ``request_started`` was answered with ``status_code`` after ``seconds``."""
        self._count(self._apis.get(api) or self._api(api), api, status_code, seconds, 1)

    def request_rejected(self, api: str, status_code: int, seconds: float) -> None:
        """A request answered without ``request_started`` (e.g. 503 at admission): counted, never in flight."""
        self._count(self._apis.get(api) or self._api(api), api, status_code, seconds, 0)

    def _count(self, state: ApiState, api: str, status_code: int, seconds: float, started: int) -> None:
        i = bisect_left(DURATION_BOUNDS, seconds)
        with state.lock:
            state.in_flight -= started
            duration = state.duration
            duration.counts[i] += 1
            duration.sum += seconds
            codes = state.codes
            if status_code in codes:
                codes[status_code] += 1
            else:
                codes[status_code] = 1
                self._code_series.append((api, status_code, time.time()))

    def observe_stage(self, api: str, stage: str, seconds: float) -> None:
        """One stage of a request (see ``STAGES``) took ``seconds``."""
        state = self._apis.get(api) or self._api(api)
        histogram = state.stages.get(stage) or self._new_stage(state, api, stage)
        i = bisect_left(DURATION_BOUNDS, seconds)
        with state.lock:
            histogram.counts[i] += 1
            histogram.sum += seconds

    def _new_stage(self, state: ApiState, api: str, stage: str) -> PlainHistogram:
        with state.lock:
            histogram = state.stages.get(stage)
            if histogram is None:
                histogram = state.stages[stage] = PlainHistogram(len(DURATION_BOUNDS))
                self._stage_series.append((api, stage, histogram))
        return histogram

    def set_queue_depth(self, api: str, n: int) -> None:
        """``n`` requests of ``api`` wait for a worker thread in this replica."""
        (self._apis.get(api) or self._api(api)).queue_depth = n

    def observe_batch(self, api: str, size: int) -> None:
        """The model of ``api`` ran once on ``size`` samples."""
        state = self._apis.get(api) or self._api(api)
        i = bisect_left(BATCH_BOUNDS, size)
        with state.lock:
            state.batch_size.counts[i] += 1
            state.batch_size.sum += size

    def observe_model_load(self, api: str, seconds: float) -> None:
        """Loading ``api`` (model and user code) took ``seconds``."""
        (self._apis.get(api) or self._api(api)).model_load = seconds
        if self._writer is not None:
            self._writer.set_model_load(api, seconds)

    def client(self, api: str) -> MetricsClient:
        """The ``metrics_client`` handed to the predictors of ``api``."""
        return MetricsClient(self._user, api)

    def render(self) -> tuple[bytes, str]:
        """The body and content type of ``GET /metrics``; all replicas' figures in multiprocess mode."""
        if self.directory is None:
            return generate_latest(self._registry), CONTENT_TYPE_LATEST
        self.flush()
        return render_directory(self.directory), CONTENT_TYPE_LATEST

    def flush(self) -> None:
        """Write the figures gathered since the last flush to the metrics dir (multiprocess mode only)."""
        if self._writer is not None:
            self._writer.flush(self._apis)

    def close(self) -> None:
        """Stop the background flush and flush what is left; the figures stay readable."""
        if self._flusher is None:
            return
        self._stop.set()
        self._flusher.join()
        self._flusher = None
        atexit.unregister(self.flush)
        self.flush()

    def _flush_every(self) -> None:
        while not self._stop.wait(self.FLUSH_INTERVAL):
            try:
                self.flush()
            except Exception:  # a full disk must not stop the replica; the next flush tries again
                logger.exception("could not write the metrics to %s", self.directory)
