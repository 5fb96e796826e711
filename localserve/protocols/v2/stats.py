"""Triton's statistics extension (``GET /v2/models/{m}/stats``) from the server's metrics (``Metrics.figures()``).

The figures are those ``GET /metrics`` and ``/stats`` show (every replica's), read by the one reader
of the metrics, so the views can never disagree:

- ``inference_stats.success`` / ``fail``: requests answered 2xx / otherwise
  (``localserve_requests_total``); their ``ns`` share out the summed request latency
  (``localserve_request_duration_seconds``, which has no status label) by count;
- ``queue``, ``compute_input``, ``compute_infer``, ``compute_output``: the phases the engine
  observes together once per request its API's threads answer 2xx, native and V2 alike
  (``localserve_request_phase_seconds``: queue, prepare, model, finish). As in Triton, the four
  have one count; it is read from the phase observed last, so a scrape in the middle of a request's
  observations cannot show counts that differ (perf_analyzer stops on that);
- ``execution_count``: model calls (the ``inference`` stage's count); ``inference_count``: rows
  the model ran for requests (``localserve_batch_size``'s sum, padding excluded; model calls when
  the API does not batch);
- ``last_inference``, cache hits and misses: localserve keeps no such figures; 0.
"""

from __future__ import annotations

from typing import Any, Protocol

from localserve.metrics import PHASES, ApiFigures

NS = 1e9
# Triton's name of each of the engine's phases (localserve.metrics.PHASES, in order).
COMPUTE = dict(zip(("queue", "compute_input", "compute_infer", "compute_output"), PHASES, strict=True))


class Figures(Protocol):
    """What the statistics are read from: the server's metrics."""

    def figures(self) -> dict[str, ApiFigures]:
        """Every API's figures (``localserve.metrics.Metrics.figures``)."""
        ...


def model_stats(metrics: Figures, name: str, version: str) -> dict[str, Any]:
    """Triton's ``model_stats`` entry of API ``name``, read from ``metrics.figures()``."""
    figures = metrics.figures().get(name) or ApiFigures()
    success = figures.requests("2xx")
    total = int(sum(figures.codes.values()))
    latency = figures.latency.sum

    def share(count: int) -> dict[str, int]:
        return {"count": count, "ns": int(latency * NS * count / total) if total else 0}

    last = figures.phases.get(PHASES[-1])
    count = int(last.count) if last is not None else 0

    def phase(label: str) -> dict[str, int]:
        found = figures.phases.get(label)
        return {"count": count, "ns": int(found.sum * NS) if found is not None and count else 0}

    inference = figures.stages.get("inference")
    executions = int(inference.count) if inference is not None else 0
    rows = int(figures.batch_size.sum) if figures.batch_size.count else executions
    zero = {"count": 0, "ns": 0}
    return {
        "name": name,
        "version": version,
        "last_inference": 0,
        "inference_count": rows,
        "execution_count": executions,
        "inference_stats": {
            "success": share(success),
            "fail": share(total - success),
            **{key: phase(label) for key, label in COMPUTE.items()},
            "cache_hit": dict(zero),
            "cache_miss": dict(zero),
        },
        "batch_stats": [],
    }
