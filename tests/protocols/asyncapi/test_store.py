"""The job stores, SQLite and Redis (a real redis-server), through the one JobStore interface.

Redis is a real redis-server process (skipped where none is installed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
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
    rfc3339,
    worker_id,
    worker_is_dead,
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


def test_a_full_sqlite_store_refuses_the_submit_and_keeps_nothing(tmp_path: Path) -> None:
    path = tmp_path / "small.sqlite3"
    store = SqliteStore.from_url(f"sqlite://{path}?max_bytes=65536")
    with pytest.raises(StoreError) as caught:
        store.submit(A, b"x" * 200_000, {}, T0)
    assert str(caught.value) == (
        f"The job store {path} is full (max_bytes=65536): database or disk is full; "
        "free disk space or wait for old jobs to be purged."
    )
    assert caught.value.status_code == 503
    assert store.state(A) is None and store.counts().in_queue == 0
    store.submit(B, b"small", {}, T0)  # what fits is still stored
    assert store.state(B).status == "in_queue"  # type: ignore[union-attr]


def test_replicas_opening_one_new_file_at_once_all_get_the_store(tmp_path: Path) -> None:
    # Replicas start together and open the same new file; SQLite refuses some of them at once
    # ("database is locked", no busy timeout) unless the open tries again. Each thread has its own
    # connection, the same race as processes; before the fix about 1 open in 130 failed here.
    failures: list[str] = []
    for round_ in range(60):
        path = tmp_path / f"jobs{round_}.sqlite3"
        start = threading.Barrier(6)

        def open_it(path: Path = path, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                SqliteStore(path).close()
            except StoreError as exc:
                failures.append(str(exc))

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    store = SqliteStore(tmp_path / "jobs0.sqlite3")
    store.submit(A, b"x", {}, T0)  # the tables are whole
    assert store.state(A).status == "in_queue"  # type: ignore[union-attr]


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


@needs_redis
def test_an_unreachable_redis_store_is_a_store_error(tmp_path: Path) -> None:
    from tests.conftest import free_port

    port = free_port()  # nothing listens there
    store = open_store(f"redis://:secret@127.0.0.1:{port}/0", cache=tmp_path, project=tmp_path, api="jobs")
    with pytest.raises(StoreError) as caught:
        store.ping()
    assert str(caught.value).startswith(f"The job store redis://:***@127.0.0.1:{port}/0 could not be reached: ")
    with pytest.raises(StoreError):
        store.submit(A, b"", {}, T0)


def test_workers_of_this_machine_are_known_dead_once_their_process_is_gone() -> None:
    import subprocess
    import sys

    me = worker_id()
    assert not worker_is_dead(me)
    child = subprocess.run(
        [sys.executable, "-c", "from localserve.protocols.asyncapi.store import worker_id; print(worker_id())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert worker_is_dead(child.stdout.strip())
    assert not worker_is_dead("another-host:1:1:abcd")  # only its lease can tell


def test_rfc3339_timestamps() -> None:
    assert rfc3339(T0) == "2027-01-15T08:00:00.000Z"


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


def test_closing_the_sqlite_store_leaves_a_busy_thread_its_connection_until_its_step_ends(tmp_path: Path) -> None:
    """Closing a connection under a thread that runs a statement on it kills the process (a segmentation
    fault in CI: a job's outcome stored on an API thread while the server stopped). ``close`` closes the
    idle threads' connections; a busy thread finishes its step, then closes its own; later steps are refused."""
    store = SqliteStore(tmp_path / "jobs.sqlite3")
    store.submit(A, b"x", {}, T0)
    assert store.claim("w1", T0, 60.0) is not None
    inside, go = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def finish_slowly() -> None:
        file = store._file
        with file.errors("written"), file.transaction() as db:
            seen["db"] = db
            inside.set()
            assert go.wait(60)
            db.execute("UPDATE jobs SET status = 'completed', finished = ? WHERE id = ?", (T0 + 1, A))

    thread = threading.Thread(target=finish_slowly)
    thread.start()
    assert inside.wait(60)
    idle = store._file.connection()  # this thread's, made by the submit and claim above
    store.close()  # while the other thread is inside its transaction
    with pytest.raises(Exception, match="closed database"):
        idle.execute("SELECT 1")
    seen["db"].execute("SELECT 1")  # type: ignore[attr-defined]  # still open: its thread is inside a step
    go.set()
    thread.join(60)

    with pytest.raises(Exception, match="closed database"):
        seen["db"].execute("SELECT 1")  # type: ignore[attr-defined]  # closed by its own thread after the commit
    with pytest.raises(StoreError, match=r"could not be read: it is closed \(the server is stopping\)\.$"):
        store.state(A)
    reopened = SqliteStore(tmp_path / "jobs.sqlite3")
    state = reopened.state(A)
    reopened.close()
    assert state is not None and state.status == "completed"  # the busy thread's step was committed


CLOSE_UNDER_WRITERS = """
import shutil, sys, tempfile, threading
from pathlib import Path
from localserve.protocols.asyncapi.sqlitefile import SqliteFile
from localserve.protocols.asyncapi.store import StoreError

for _ in range(int(sys.argv[1])):
    folder = tempfile.mkdtemp(dir=sys.argv[2])
    file = SqliteFile(Path(folder) / "jobs.sqlite3", "CREATE TABLE t (x INTEGER);")
    stop = threading.Event()
    started = [threading.Event(), threading.Event()]

    def write(started):
        try:
            while not stop.is_set():
                with file.errors("written"), file.transaction() as db:
                    db.execute("INSERT INTO t VALUES (1)")
                started.set()
        except StoreError:
            started.set()

    threads = [threading.Thread(target=write, args=(e,)) for e in started]
    for thread in threads:
        thread.start()
    for event in started:
        event.wait(60)
    file.close()  # while both threads write
    stop.set()
    for thread in threads:
        thread.join(60)
    shutil.rmtree(folder)
print("closed under writers without a crash")
"""


def test_closing_under_writing_threads_never_crashes_the_process(tmp_path: Path) -> None:
    """The same race, many times, in a process of its own: before the fix it died with SIGSEGV (-11) in the
    first round. On tmpfs where there is one: each commit is an fsync (``synchronous=FULL``)."""
    shm = Path("/dev/shm")
    where = shm if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path
    proc = subprocess.run(
        [sys.executable, "-c", CLOSE_UNDER_WRITERS, "20", str(where)], capture_output=True, text=True, timeout=240
    )

    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == "closed under writers without a crash\n"


@needs_redis
def test_the_project_named_in_a_redis_url_keeps_its_jobs_apart(tmp_path: Path, redis_url: str) -> None:
    """Pods all serve /mnt/project: ``?project=NAME`` (what export kubernetes writes) names the keys instead,
    so two projects' APIs of one name share a Redis without taking each other's jobs."""
    import redis

    shop = open_store(f"{redis_url}?project=shop", cache=tmp_path, project=Path("/mnt/project"), api="words")
    lab = open_store(f"{redis_url}?project=lab", cache=tmp_path, project=Path("/mnt/project"), api="words")
    shop.submit(A, b"{}", {}, T0)
    assert lab.claim("w1", T0, lease=30) is None
    job = shop.claim("w1", T0, lease=30)
    assert job is not None and job.id == A
    keys = {key.decode() for key in redis.Redis.from_url(redis_url).keys("*")}
    assert keys and all(key.startswith("localserve:shop:words:") for key in keys), keys
    shop.close()
    lab.close()


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


def test_a_sqlite_store_whose_shm_turns_read_only_is_broken_not_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A read-only remount under the store (its file system's statvfs says so; remounting needs privileges a test
    has not): every use is a StoreError naming why, the jobs' fate is logged once, and closing touches nothing."""
    import localserve.protocols.asyncapi.sqlitefile as sqlitefile

    path = tmp_path / "jobs.sqlite3"
    db = SqliteStore(path)
    db.submit(A, b"{}", {}, T0)
    real = os.statvfs

    def read_only(target: os.PathLike[str] | str) -> os.statvfs_result:
        found = real(target)
        if str(target) != f"{path}-shm":
            return found
        return os.statvfs_result((*found[:8], found.f_flag | os.ST_RDONLY, found.f_namemax))

    monkeypatch.setattr(sqlitefile.os, "statvfs", read_only)
    why = "its shared-memory file (-shm) cannot be written (read-only, or on a read-only file system)"
    for use in (lambda: db.submit(B, b"{}", {}, T0), db.ping, lambda: db.state(A)):
        with pytest.raises(StoreError) as refused:
            use()
        assert str(refused.value) == f"The job store {path} could not be written: {why}."
        assert refused.value.public.startswith("the job store's files were deleted or changed while the server ran")
    db.close()
    monkeypatch.undo()
    assert caplog.text.count(f"The job store {path} is unusable: {why}") == 1
    assert "the jobs it holds stay in its file, and run once the server restarts on it" in caplog.text
    reopened = SqliteStore(path)  # the next server: the jobs are there
    assert reopened.state(A) is not None and reopened.state(B) is None
    reopened.close()


def test_a_worker_on_a_broken_store_says_so_once_not_every_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from localserve.protocols.asyncapi.worker import AsyncWorker

    path = tmp_path / "jobs.sqlite3"
    real_store = SqliteStore(path)
    (path.parent / "moved.sqlite3").write_bytes(b"")
    os.replace(path.parent / "moved.sqlite3", path)  # another file where the store's was: broken at its next use
    tries = threading.Semaphore(0)

    class Counted:  # the real store, each use of it counted
        def __getattr__(self, name: str) -> object:
            method = getattr(real_store, name)

            def counted(*args: object, **kwargs: object) -> object:
                tries.release()
                return method(*args, **kwargs)

            return counted

    worker = AsyncWorker("jobs", Counted(), lambda job: None, slots=1, retention=60.0, ready=lambda: True)  # type: ignore[arg-type]
    worker.start()
    try:
        for _ in range(3):  # three uses, each refused (the worker tries again a second later)
            assert tries.acquire(timeout=60)
    finally:
        worker.stop()
        real_store.close()
    assert caplog.text.count("its file was replaced by another file") == 2  # the store's own line, the worker's once
