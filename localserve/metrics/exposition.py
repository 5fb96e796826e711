"""The body of ``GET /metrics``: Prometheus's text format or OpenMetrics, as the scraper asks, gzipped if it may.

Example::

    body, headers = expose(metrics.families(), accept="application/openmetrics-text", accept_encoding="gzip")

prometheus_client's own negotiation decides, as its HTTP server does; every source's families (the metrics, the process,
the AsyncAPI job stores) go out as one exposition, as OpenMetrics needs (one ``# EOF``). With replicas, each replica's
``process_*`` figures carry a ``pid`` label, so whichever replica answers shows every live one.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def expose(families: Iterable[Metric], accept: str, accept_encoding: str) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a scrape of ``families`` whose request said ``accept`` and ``accept_encoding``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(families)))
    encoder, content_type = choose_encoder(accept)
    body = encoder(registry)
    headers = {"Content-Type": content_type, "Vary": "Accept, Accept-Encoding"}
    if gzip_accepted(accept_encoding):
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    return body, headers


class ReplicaProcesses(Collector):
    """``process_*`` of every replica writing to the multiprocess folder ``directory``, labelled by ``pid``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for pid in self._pids():
            collector = ProcessCollector(pid=lambda pid=pid: pid, registry=None)  # type: ignore[misc]
            for family in collector.collect():  # nothing for a pid that has exited
                into = merged.get(family.name)
                if into is None:
                    into = merged[family.name] = Metric(family.name, family.documentation, family.type)
                into.samples.extend(
                    Sample(s.name, {**s.labels, "pid": str(pid)}, s.value, s.timestamp, s.exemplar)
                    for s in family.samples
                )
        return iter(merged.values())

    def _pids(self) -> list[int]:
        # prometheus_client names its files <kind>[_<mode>]_<pid>.db
        pids = set()
        for name in os.listdir(self.directory):
            stem, _, pid = name.removesuffix(".db").rpartition("_")
            if stem and pid.isdigit():
                pids.add(int(pid))
        return sorted(pids)
