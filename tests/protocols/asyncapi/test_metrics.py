"""AsyncAPI figures for ``GET /metrics``, read from a real SQLite job store when collected."""

from __future__ import annotations

from pathlib import Path

from localserve.protocols.asyncapi.metrics import collect_metrics
from localserve.protocols.asyncapi.sqlite import SqliteStore
from localserve.protocols.asyncapi.store import LATENCY_BOUNDS

T0 = 1_800_000_000.0  # the store takes the time as an argument: no clock decides this test


def samples(stores: dict[str, SqliteStore]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value for family in collect_metrics(stores) for s in family.samples
    }


def test_the_queue_the_latency_and_the_store_being_up_are_read_from_the_store(tmp_path: Path) -> None:
    assert collect_metrics({}) == []  # no AsyncAPI: no family
    store = SqliteStore(tmp_path / "jobs.sqlite3")
    try:
        store.submit("a" * 32, b"{}", {}, T0)
        claimed = store.claim("w1", T0, lease=30)
        assert claimed is not None
        assert store.finish(claimed.id, "w1", T0 + LATENCY_BOUNDS[0] / 2, result="{}", error=None)
        store.submit("b" * 32, b"{}", {}, T0 + 1)
        store.submit("c" * 32, b"{}", {}, T0 + 2)
        assert store.claim("w1", T0 + 3, lease=30) is not None
        got = samples({"jobs": store})
    finally:
        store.close()
    assert got[("localserve_async_jobs", (("api", "jobs"), ("status", "in_queue")))] == 1
    assert got[("localserve_async_jobs", (("api", "jobs"), ("status", "in_progress")))] == 1
    assert got[("localserve_async_store_up", (("api", "jobs"),))] == 1
    completed = (("api", "jobs"), ("status", "completed"))
    assert got[("localserve_async_job_duration_seconds_count", completed)] == 1
    first = (("api", "jobs"), ("le", str(LATENCY_BOUNDS[0])), ("status", "completed"))
    assert got[("localserve_async_job_duration_seconds_bucket", first)] == 1  # cumulative from the first bound
    assert got[("localserve_async_job_duration_seconds_count", (("api", "jobs"), ("status", "failed")))] == 0
