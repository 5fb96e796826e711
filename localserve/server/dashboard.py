"""The dashboard's data (``GET /dashboard/data``) and the bounds of its polling (``?interval=``)."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from localserve.metrics.summary import models_json
from localserve.server.site import Site

if TYPE_CHECKING:
    from localserve.metrics import Distribution, Metrics

# The seconds ?interval= may ask between polls: more often would load the server for nothing, and a
# browser's setTimeout fires at once past ~24 days.
POLLS = (0.1, 3600.0)


def interval_refusal(given: list[str]) -> str | None:
    """Why the dashboard's ``?interval=`` values are refused (a number of seconds in ``POLLS``); None if not."""
    for text in given:
        try:
            if POLLS[0] <= float(text) <= POLLS[1]:  # NaN is not
                continue
        except ValueError:
            pass
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        return f"?interval={shown} is not a number of seconds from {POLLS[0]:g} to {POLLS[1]:g} (between polls)."
    return None


def dashboard_figures(metrics: Metrics | None) -> dict[str, dict[str, Any]]:
    """Every API's figures as ``Metrics.figures()`` reads them (all replicas), in the dashboard's JSON.

    ``{api: {"codes": {"200": n}, "in_flight": n, "queue_depth": n, "model_load": s,
    "latency": {"buckets": [[le, cumulative count], ...], "count": n, "sum": s},
    "batch_size": {...same...}}}`` (``le`` None for +Inf); empty when metrics are off (``--no-metrics``).
    """
    if metrics is None:
        return {}
    return {
        name: {
            "codes": dict(figures.codes),
            "in_flight": figures.in_flight,
            "queue_depth": figures.queue_depth,
            "model_load": figures.model_load,
            "latency": _histogram(figures.latency),
            "batch_size": _histogram(figures.batch_size),
            "models": models_json(figures),
        }
        for name, figures in metrics.figures().items()
    }


def _histogram(distribution: Distribution) -> dict[str, Any]:
    """A histogram for JSON: +Inf's bound is ``None`` (JSON has no infinity)."""
    buckets = [[None if math.isinf(le) else le, n] for le, n in distribution.buckets]
    return {"buckets": buckets, "count": distribution.count, "sum": distribution.sum}


def dashboard_data(app: Site) -> dict[str, Any]:
    """The dashboard's figures: ``dashboard_figures`` per API, with status, device and tracker; each
    TrafficSplitter's ``/stats`` entry (its APIs' weights and requests, its shadow's copies); ``--reload``'s state."""
    figures = dashboard_figures(app.metrics)
    stats = {entry["api"]: entry for entry in app.stats.stats_json()}
    apis = []
    for name, rt in app.apis.items():
        info = rt.describe()
        apis.append(
            {
                "name": name,
                "kind": rt.api.kind,
                "status": rt.state,
                "error": rt.error,
                "model_format": rt.api.model_format,
                "device": info.get("device"),
                "gpu": rt.api.compute.gpu > 0,
                "batching": rt.api.batching.max_batch_size if rt.api.batching is not None else None,
                "figures": figures.get(name),
                "tracker": stats.get(name, {}).get("tracker"),
            }
        )
    reload = app.reloader.status() if app.reloader is not None else None  # serve --reload
    splitters = app.splitters.stats_json()
    return {
        "time": time.time(),
        "metrics": app.metrics is not None,
        "apis": apis,
        "splitters": splitters,
        "reload": reload,
    }
