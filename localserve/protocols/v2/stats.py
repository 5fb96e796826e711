"""Triton's statistics extension (``GET /v2/models[/{m}[/versions/{v}]]/stats``) from the server's metrics.

Read through the one reader of the metrics (``Metrics.figures()``, every replica's), so no view disagrees.
Triton's *Statistics Extension* (``docs/protocol/extension_statistics.md``): an entry per model version;
``inference_count`` counts each row of a batched request, ``execution_count`` the model's executions.

An API's entry (version 1):

- ``success`` / ``fail``: requests answered 2xx / otherwise; their ``ns`` share the summed latency by count;
- ``queue``, ``compute_input``, ``compute_infer``, ``compute_output``: the engine's phases (queue, prepare,
  model, finish), one count read from the phase observed last, so a scrape never shows counts that differ;
- ``inference_count``: one row per success plus what V2 requests had beyond one (``localserve_request_rows``,
  recorded right after the success on the loop where these entries are read, so it never leads);
- ``execution_count``: model calls; ``last_inference`` and the cache figures: 0 (not kept).

A model of a multi-model API (``<api>.<model>``) has an entry per loaded version: ``success`` and
``inference_count`` count the V2 requests answered 2xx that ran it and their rows, ``execution_count`` its
model calls; no times or failures are kept per version (0), the API's own entry counts every request.
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
