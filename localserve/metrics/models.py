"""The figures of the models of an API with several models (Cortex's ``models: {paths | dir}``).

Each model version's loads, evictions (by reason: ``cache``, ``removed``, ``replaced``), load time and
call time are prometheus_client figures labelled ``api``, ``model``, ``version``; ``figures.read_figures``
reads them back into ``ApiFigures.models`` for ``/stats``, ``localserve get`` and the dashboard.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from localserve.metrics.names import MODEL_DURATION, MODEL_EVICTIONS, MODEL_LOAD_DURATION, MODEL_LOADS

LOAD_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class ModelMetrics:
    """The per-model families of one registry."""

    def __init__(self, registry: CollectorRegistry, buckets: tuple[float, ...]) -> None:
        labels = ["api", "model", "version"]
        self.loads = Counter(MODEL_LOADS, "Model versions loaded into memory.", labels, registry=registry)
        self.evictions = Counter(
            MODEL_EVICTIONS,
            "Model versions that left memory: cache (least recently used), removed or replaced (files changed).",
            [*labels, "reason"],
            registry=registry,
        )
        self.load_duration = Histogram(
            MODEL_LOAD_DURATION, "Time to load a model version.", labels, buckets=LOAD_BUCKETS, registry=registry
        )
        self.duration = Histogram(
            MODEL_DURATION, "Time of one call of a model version.", labels, buckets=buckets, registry=registry
        )

    def observer(self, api: str) -> ModelFigures:
        """What the models of API ``api`` report to (a ``runtimes.modelset.ModelObserver``)."""
        return ModelFigures(self, api)


class ModelFigures:
    """The ``ModelObserver`` of one API: each event becomes its figure."""

    def __init__(self, families: ModelMetrics, api: str) -> None:
        self.families = families
        self.api = api

    def loaded(self, model: str, version: int, seconds: float) -> None:
        """A version was loaded in ``seconds``."""
        self.families.loads.labels(self.api, model, str(version)).inc()
        self.families.load_duration.labels(self.api, model, str(version)).observe(seconds)

    def evicted(self, model: str, version: int, reason: str) -> None:
        """A version left memory."""
        self.families.evictions.labels(self.api, model, str(version), reason).inc()

    def ran(self, model: str, version: int, seconds: float) -> None:
        """One call of a version took ``seconds``."""
        self.families.duration.labels(self.api, model, str(version)).observe(seconds)
