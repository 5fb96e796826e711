"""AsyncAPI figures for ``GET /metrics``, read from the job stores when scraped.

The stores are the one source: every replica (and, with Redis, every machine) sees the same queue
and the same latency histogram, which the stores count as jobs finish.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from localserve.protocols.asyncapi.store import LATENCY_BOUNDS, JobStore, StoreError

log = logging.getLogger("localserve")


class _StoreCollector(Collector):
    def __init__(self, stores: Mapping[str, JobStore]) -> None:
        self.stores = stores

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        queue = GaugeMetricFamily(
            "localserve_async_jobs",
            "AsyncAPI jobs waiting (in_queue) and running (in_progress)",
            labels=["api", "status"],
        )
        latency = HistogramMetricFamily(
            "localserve_async_job_duration_seconds",
            "AsyncAPI jobs from submit to their result, by outcome (completed, failed)",
            labels=["api", "status"],
        )
        up = GaugeMetricFamily("localserve_async_store_up", "1 when the AsyncAPI's job store answers", labels=["api"])
        for name, store in sorted(self.stores.items()):
            try:
                counts = store.counts()
            except StoreError as exc:
                log.warning("api %r: /metrics could not read the job store: %s", name, exc)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            queue.add_metric([name, "in_queue"], counts.in_queue)
            queue.add_metric([name, "in_progress"], counts.in_progress)
            for outcome in ("completed", "failed"):
                per_bucket = counts.buckets.get(outcome, [0] * (len(LATENCY_BOUNDS) + 1))
                total = 0
                buckets: list[tuple[str, float]] = []
                for bound, number in zip((*map(str, LATENCY_BOUNDS), "+Inf"), per_bucket, strict=True):
                    total += number
                    buckets.append((bound, total))
                latency.add_metric([name, outcome], buckets, counts.sums.get(outcome, 0.0))
        yield queue
        yield latency
        yield up


def collect_metrics(stores: Mapping[str, JobStore]) -> list[Metric]:
    """The AsyncAPI metric families, read from the stores (none without AsyncAPIs)."""
    if not stores:
        return []
    return list(_StoreCollector(stores).collect())
