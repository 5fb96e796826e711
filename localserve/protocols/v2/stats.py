"""Triton's statistics extension (``GET /v2/models[/{m}[/versions/{v}]]/stats``) from the server's metrics.

The figures are those ``GET /metrics`` and ``/stats`` show (every replica's), read by the one reader
of the metrics (``Metrics.figures()``), so the views can never disagree. Triton's own words are in its
documentation, *Statistics Extension* (``docs/protocol/extension_statistics.md``): an entry per model
version; ``inference_count`` counts each inference of a batched request (a request of batch size 64 adds
64), ``execution_count`` the model's executions (requests batched together execute once).

An API's entry (version 1):

- ``inference_stats.success`` / ``fail``: requests answered 2xx / otherwise
  (``localserve_requests_total``); their ``ns`` share out the summed request latency
  (``localserve_request_duration_seconds``, which has no status label) by count;
- ``queue``, ``compute_input``, ``compute_infer``, ``compute_output``: the phases the engine
  observes together once per request its API's threads answer 2xx, native and V2 alike
  (``localserve_request_phase_seconds``: queue, prepare, model, finish). As in Triton, the four
  have one count; it is read from the phase observed last, so a scrape in the middle of a request's
  observations cannot show counts that differ (perf_analyzer stops on that);
- ``inference_count``: the rows of the requests answered 2xx: one for each success, plus what V2 requests
  had beyond one (``localserve_request_rows``: a V2 request's batch dimension when the model takes a
  batch, else 1; native requests are not observed there, each is one row). The engine records the rows
  right after the success, on the event loop where these entries are read, so they move together;
- ``execution_count``: model calls (the ``inference`` stage's count);
- ``last_inference``, cache hits and misses: localserve keeps no such figures; 0.

A model of a multi-model API (``<api>.<model>``) has an entry per version it loaded, each with the
figures of that version: ``success`` (and the queue and compute counts) and ``inference_count`` count
the V2 requests answered 2xx that ran it and their rows, ``execution_count`` its model calls
(``localserve_model_duration_seconds``). localserve keeps no times per version, nor the failures (a
request may fail before its version is known): those are 0; the API's own figures count every request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from localserve.metrics import PHASES, ApiFigures
from localserve.metrics.figures import VersionFigures

NS = 1e9
# Triton's name of each of the engine's phases (localserve.metrics.PHASES, in order).
COMPUTE = dict(zip(("queue", "compute_input", "compute_infer", "compute_output"), PHASES, strict=True))
Where = tuple[str, str] | None
"""Where a V2 model's figures are: ``(api, model)`` for a model of a multi-model API, None for an API itself."""


class Figures(Protocol):
    """What the statistics are read from: the server's metrics."""

    def figures(self) -> dict[str, ApiFigures]:
        """Every API's figures (``localserve.metrics.Metrics.figures``)."""
        ...


def model_stats(metrics: Figures, name: str, version: str, where: Where = None) -> dict[str, Any]:
    """Triton's ``model_stats`` entry of V2 model ``name`` at ``version``."""
    return _entry(metrics.figures(), name, version, where)


def every_model_stats(metrics: Figures, models: Iterable[tuple[str, Where]]) -> list[dict[str, Any]]:
    """The entries of every V2 model (``(name, where)``), read at once: an API's as version 1, a multi-model API's
    model's one per version it loaded, each named by its version."""
    figures = metrics.figures()
    entries = []
    for name, where in models:
        if where is None:
            entries.append(_entry(figures, name, "1", None))
            continue
        found = figures.get(where[0]) or ApiFigures()
        versions = sorted(int(v) for m, v in found.models if m == where[1])
        entries += [_entry(figures, name, str(v), where) for v in versions]
    return entries


def _entry(figures: Mapping[str, ApiFigures], name: str, version: str, where: Where) -> dict[str, Any]:
    if where is not None:
        api = figures.get(where[0]) or ApiFigures()
        return _version_entry(api.models.get((where[1], version)) or VersionFigures(), name, version)
    return _api_entry(figures.get(name) or ApiFigures(), name, version)


def _api_entry(figures: ApiFigures, name: str, version: str) -> dict[str, Any]:
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
    stats = {"success": share(success), "fail": share(total - success)}
    stats.update({key: phase(label) for key, label in COMPUTE.items()})
    rows = success + int(figures.rows.sum - figures.rows.count)  # V2's rows beyond one a request
    return _shaped(name, version, rows, executions, stats)


def _version_entry(figures: VersionFigures, name: str, version: str) -> dict[str, Any]:
    success = int(figures.rows.count)
    stats = {key: {"count": 0 if key == "fail" else success, "ns": 0} for key in ("success", "fail", *COMPUTE)}
    return _shaped(name, version, int(figures.rows.sum), int(figures.latency.count), stats)


def _shaped(name: str, version: str, rows: int, executions: int, stats: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "last_inference": 0,
        "inference_count": rows,
        "execution_count": executions,
        "inference_stats": {**stats, "cache_hit": {"count": 0, "ns": 0}, "cache_miss": {"count": 0, "ns": 0}},
        "batch_stats": [],
    }
