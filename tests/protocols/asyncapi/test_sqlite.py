"""The SQLite job store: concurrent submits all land, and one that does not fit fails alone."""

from __future__ import annotations

from pathlib import Path

from localserve.protocols.asyncapi.sqlite import SqliteStore
from localserve.protocols.asyncapi.store import StoreError
from tests.protocols.asyncapi.test_store import T0


def test_concurrent_submits_all_land_and_one_that_does_not_fit_fails_alone(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store = SqliteStore.from_url(f"sqlite://{tmp_path / 'jobs.sqlite3'}?max_bytes=131072")
    ids = [f"{index:032x}" for index in range(40)]
    big = "f" * 32

    def submit(job_id: str) -> str:
        try:
            store.submit(job_id, b"x" * (300_000 if job_id == big else 10), {}, T0)
        except StoreError:
            return "refused"
        return "stored"

    with ThreadPoolExecutor(8) as pool:
        outcomes = dict(zip([*ids, big], pool.map(submit, [*ids, big]), strict=True))
    assert outcomes == {**dict.fromkeys(ids, "stored"), big: "refused"}
    assert store.counts().in_queue == 40 and store.state(big) is None
    store.close()
