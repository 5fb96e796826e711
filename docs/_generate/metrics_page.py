"""The metrics reference: every family of the Prometheus registry a replica builds (``localserve.metrics``),
the AsyncAPI store's families and user metrics' naming, with type, labels and help."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import Metric

from localserve.metrics import Metrics
from localserve.metrics.extras import ExtraMetrics
from localserve.protocols.asyncapi.metrics import _StoreCollector

INTRO = """# Metrics

`GET /metrics` serves Prometheus text (OpenMetrics 1.0 when the scraper's `Accept` asks for it, gzip when
it accepts it), every replica's figures added up. Latency is in seconds. The `/stats` routes, `localserve
get`, the dashboard and the Open Inference Protocol's statistics all read these same figures. Generated
from the registry a replica builds; a counter is exposed with `_total` after its name.

No `*_created` series are written. With `--no-metrics` nothing is counted and `/metrics` is a 404.
"""

USER = """## Predictors' own metrics

A predictor's `metrics_client` (Cortex 0.30+: `gauge(metric, value, tags)`, `increment(metric, value=1,
tags)`, `histogram(metric, value, tags)`; also `put`, as `gauge`) makes `localserve_user_<metric>`: a
gauge, a counter (with `_total`) or a histogram (buckets 1, 2.5, 5 · 10^-3..10^5), labelled `api` and the
tags. A name starting with `cortex_` or `istio_` raises Cortex's `ValueError`; any other mistake is logged,
never raised.
"""

EXPOSED = {"counter": "_total"}


def _labels(family: Metric, known: dict[str, tuple[str, ...]]) -> list[str]:
    names: dict[str, None] = dict.fromkeys(known.get(family.name, getattr(family, "_labelnames", ())))
    for sample in family.samples:
        for label in sample.labels:
            if label not in ("le", "quantile"):
                names.setdefault(label)
    return list(names)


def families() -> list[tuple[Metric, list[str]]]:
    """Every family with its labels: the registry's, with one request, stage, batch and phase recorded so that
    families labelled at use show their labels; then the process and platform families and the AsyncAPI's."""
    metrics = Metrics(["api"])
    ExtraMetrics(metrics.registry)
    metrics.request_finished("api", 200, 0.001)
    metrics.observe_stage("api", "inference", 0.001)
    metrics.observe_batch("api", 1)
    metrics.phase_observer("api")([0.001, 0.001, 0.001, 0.001])
    known = {
        getattr(c, "_name", ""): tuple(getattr(c, "_labelnames", ()))
        for c in list(metrics.registry._collector_to_names)  # the labels of families not yet used
    }
    found: Iterable[Metric] = [*metrics.families(), *_StoreCollector({}).collect()]  # the store's, without a store
    return [(family, _labels(family, known)) for family in found]


def render() -> str:
    """The page: localserve's families, then the process's and the platform's."""
    rows, system = [], []
    for family, labels in families():
        name = f"`{family.name}{EXPOSED.get(family.type, '')}`"
        row = f"| {name} | {family.type} | {', '.join(f'`{x}`' for x in labels)} | {family.documentation} |"
        (rows if family.name.startswith("localserve_") else system).append(row)
    head = ["| family | type | labels | what it counts |", "|---|---|---|---|"]
    async_labels = "The AsyncAPI families are read from the job stores when `/metrics` is scraped."
    return "\n".join(
        [
            INTRO,
            "## localserve's families",
            "",
            async_labels,
            "",
            *head,
            *rows,
            "",
            USER,
            "## The process and the platform",
            "",
            "prometheus_client's own; with replicas each live replica's `process_*` carries a `pid` label.",
            "",
            *head,
            *system,
            "",
        ]
    )
