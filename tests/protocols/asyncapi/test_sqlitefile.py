"""One SQLite file from many threads and processes: replicas opening a new file at once, a full store in
words, closing under busy threads (never pulling a connection from under one), a -shm file turned read-only.

Closing under writing threads runs in a child Python: the crash it guards against would end pytest's process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from localserve.protocols.asyncapi.sqlite import SqliteStore
from localserve.protocols.asyncapi.store import StoreError
from tests.protocols.asyncapi.test_store import T0, A, B


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
