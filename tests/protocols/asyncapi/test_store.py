"""The job stores, SQLite and Redis (a real redis-server), through the one JobStore interface.

Redis is a real redis-server process (skipped where none is installed)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from localserve.protocols.asyncapi.sqlite import SqliteStore
from localserve.protocols.asyncapi.store import (
    LATENCY_BOUNDS,
    JobStore,
    StoreError,
    default_store_path,
    open_store,
)
from tests.protocols.asyncapi.conftest import needs_redis

T0 = 1_800_000_000.0  # the stores take the time as an argument: no clock decides these tests
A, B, C = ("a" * 32, "b" * 32, "c" * 32)


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=needs_redis)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    if request.param == "sqlite":
        made: JobStore = SqliteStore(tmp_path / "jobs.sqlite3")
    else:
        made = open_store(request.getfixturevalue("redis_url"), cache=tmp_path, project=tmp_path, api="jobs")
    yield made
    made.close()


def test_a_job_goes_from_queue_to_result(store: JobStore) -> None:
    store.submit(A, b'{"x": 1}', {"content_type": "application/json"}, T0)
    assert store.state(A).status == "in_queue"  # type: ignore[union-attr]
    job = store.claim("w1", T0 + 1, lease=30)
    assert job is not None and (job.id, job.payload, dict(job.meta), job.attempts) == (
        A,
        b'{"x": 1}',
        {"content_type": "application/json"},
        1,
    )
    assert store.state(A).status == "in_progress"  # type: ignore[union-attr]
    assert store.claim("w2", T0 + 1, lease=30) is None
    assert store.finish(A, "w1", T0 + 2.5, result='{"y": 2}', error=None) is True
    state = store.state(A)
    assert state is not None and (state.status, state.result, state.error, state.finished) == (
        "completed",
        '{"y": 2}',
        None,
        T0 + 2.5,
    )
    assert store.state(B) is None


def test_jobs_are_claimed_oldest_first_each_by_one_worker(store: JobStore) -> None:
    for index, job_id in enumerate((A, B, C)):
        store.submit(job_id, job_id.encode(), {}, T0 + index)
    claimed = [store.claim(f"w{i}", T0 + 5, lease=30) for i in range(4)]
    assert [job.id if job else None for job in claimed] == [A, B, C, None]


def test_failed_jobs_keep_their_message_and_the_histogram_counts_both_outcomes(store: JobStore) -> None:
    store.submit(A, b"", {}, T0)
    store.submit(B, b"", {}, T0)
    store.claim("w", T0, lease=30)
    store.claim("w", T0, lease=30)
    store.finish(A, "w", T0 + 0.07, result="1", error=None)
    store.finish(B, "w", T0 + 20, result=None, error="PythonPredictor.predict raised ValueError: boom")
    state = store.state(B)
    assert state is not None and (state.status, state.error) == (
        "failed",
        "PythonPredictor.predict raised ValueError: boom",
    )
    counts = store.counts()
    assert (counts.in_queue, counts.in_progress) == (0, 0)
    expected_completed = [0] * (len(LATENCY_BOUNDS) + 1)
    expected_completed[LATENCY_BOUNDS.index(0.1)] = 1
    expected_failed = [0] * (len(LATENCY_BOUNDS) + 1)
    expected_failed[LATENCY_BOUNDS.index(30.0)] = 1
    assert counts.buckets == {"completed": expected_completed, "failed": expected_failed}
    assert counts.sums["completed"] == pytest.approx(0.07, abs=1e-3)
    assert counts.sums["failed"] == pytest.approx(20.0, abs=1e-3)


def test_an_expired_lease_or_a_dead_worker_puts_the_job_back_and_it_runs_again(store: JobStore) -> None:
    store.submit(A, b"a", {}, T0)
    store.submit(B, b"b", {}, T0 + 1)
    store.submit(C, b"c", {}, T0 + 2)
    assert store.claim("alive", T0, lease=30).id == A  # type: ignore[union-attr]
    assert store.claim("dead", T0, lease=1000).id == B  # type: ignore[union-attr]
    assert store.claim("alive", T0, lease=1000).id == C  # type: ignore[union-attr]
    store.renew([C], "alive", T0 + 2000)
    # At T0 + 31: A's lease ran out; B's worker is dead; C is held by a live worker with a fresh lease.
    back = store.recover(T0 + 31, lambda worker: worker == "dead")
    assert sorted(back) == [A, B]
    assert store.counts().in_queue == 2 and store.counts().in_progress == 1
    again = store.claim("other", T0 + 32, lease=30)
    assert again is not None and again.id in (A, B) and again.attempts == 2
    # The first worker of a recovered job cannot record an outcome any more.
    assert store.finish(again.id, "alive" if again.id == A else "dead", T0 + 33, result="1", error=None) is False
    assert store.finish(again.id, "other", T0 + 33, result="1", error=None) is True


def test_purge_deletes_only_jobs_finished_before_the_cutoff(store: JobStore) -> None:
    for job_id in (A, B, C):
        store.submit(job_id, b"", {}, T0)
    store.claim("w", T0, lease=30)
    store.claim("w", T0, lease=30)
    store.finish(A, "w", T0 + 10, result="1", error=None)
    store.finish(B, "w", T0 + 100, result=None, error="e")
    assert store.purge(T0 + 50) == 1
    assert store.state(A) is None
    assert store.state(B).status == "failed"  # type: ignore[union-attr]
    assert store.state(C).status == "in_queue"  # type: ignore[union-attr]


def test_payloads_keep_every_byte(store: JobStore) -> None:
    payload = bytes(range(256)) * 40_000  # 10 MB of every byte value
    store.submit(A, payload, {}, T0)
    job = store.claim("w", T0, lease=30)
    assert job is not None and job.payload == payload


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "sqlite://relative.db",
            "Invalid SQLite store URL 'sqlite://relative.db'; expected sqlite:///ABSOLUTE/PATH, optionally ?max_bytes=N.",
        ),
        (
            "sqlite:///tmp/x.db?size=1",
            "Invalid SQLite store URL 'sqlite:///tmp/x.db?size=1'; expected sqlite:///ABSOLUTE/PATH, optionally ?max_bytes=N.",
        ),
        (
            "sqlite:///tmp/x.db?max_bytes=10",
            "Invalid max_bytes '10' in 'sqlite:///tmp/x.db?max_bytes=10'; expected a whole number of bytes >= 65536.",
        ),
        (
            "postgres://db/jobs",
            "Unknown job store 'postgres://db/jobs'; expected sqlite:///PATH (the default, under the cache folder) "
            "or redis://HOST:PORT/DB.",
        ),
    ],
)
def test_bad_store_urls_say_what_was_expected(url: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(url, cache=tmp_path, project=tmp_path, api="jobs")
    assert str(caught.value) == message


def test_the_default_store_is_one_sqlite_file_per_project_and_api(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    path = default_store_path(tmp_path / "cache", one, "jobs")
    assert path.parent.parent == tmp_path / "cache" / "async"
    assert re.fullmatch(r"one-[0-9a-f]{12}", path.parent.name) and path.name == "jobs.sqlite3"
    assert default_store_path(tmp_path / "cache", two, "jobs").parent != path.parent
    assert default_store_path(tmp_path / "cache", one, "other") == path.parent / "other.sqlite3"
    store = open_store(None, cache=tmp_path / "cache", project=one, api="jobs")
    store.close()
    db = SqliteStore(path)
    assert db._db().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_the_project_parameter_leaves_the_rest_of_the_url_as_it_was() -> None:
    from localserve.protocols.asyncapi.store import redis_project, with_project

    assert redis_project("redis://r:6379/0", "project") == ("redis://r:6379/0", "project")
    assert redis_project("rediss://:pw@r:6380/2?project=shop&ssl_cert_reqs=none", "project") == (
        "rediss://:pw@r:6380/2?ssl_cert_reqs=none",
        "shop",
    )
    assert with_project("redis://r:6379/0", "shop") == "redis://r:6379/0?project=shop"
    assert with_project("redis://r/0?ssl_cert_reqs=none", "shop") == "redis://r/0?ssl_cert_reqs=none&project=shop"
    assert with_project("redis://r/0?project=mine", "shop") == "redis://r/0?project=mine"  # the user's own wins
    with pytest.raises(StoreError) as info:
        redis_project("redis://r/0?project=a:b", "project")
    assert str(info.value) == (
        "Invalid project='a:b' in the job store URL; expected letters, digits, '.', '_' or '-' (the project's name "
        "in the store's keys)."
    )
