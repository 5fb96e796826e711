"""The default job store: one SQLite file (WAL, synchronous=FULL) shared by the replicas of one machine.

Each thread has its own connection (``sqlitefile.SqliteFile``). A claim is one ``UPDATE ... RETURNING``
statement, so two processes can never claim one job; a submit returns only once its transaction is on disk.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from localserve.protocols.asyncapi.jobs import LATENCY_BOUNDS, Counts, Job, JobState, StoreError, latency_bucket
from localserve.protocols.asyncapi.sqlitefile import SqliteFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    payload BLOB,
    meta TEXT NOT NULL,
    submitted REAL NOT NULL,
    started REAL,
    finished REAL,
    worker TEXT,
    lease_until REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status);
CREATE INDEX IF NOT EXISTS jobs_by_finished ON jobs (finished) WHERE finished IS NOT NULL;
CREATE TABLE IF NOT EXISTS latency (
    outcome TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    count INTEGER NOT NULL DEFAULT 0,
    seconds REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (outcome, bucket)
);
"""
SUM_BUCKET = -1  # the row holding an outcome's total count and seconds


class _Pending:
    """One submit waiting for the group commit."""

    __slots__ = ("done", "error", "row")

    def __init__(self, row: tuple[str, bytes, str, float]) -> None:
        self.row = row
        self.done = threading.Event()
        self.error: StoreError | None = None


class SqliteStore:
    """Jobs of one AsyncAPI in one SQLite file."""

    def __init__(self, path: Path, *, max_bytes: int | None = None) -> None:
        self.path = path
        self.url = f"sqlite://{path}"
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._committing = False
        self._file = SqliteFile(path, SCHEMA, max_bytes=max_bytes)

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        """``sqlite:///ABSOLUTE/PATH[?max_bytes=N]``."""
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        unknown = sorted(set(query) - {"max_bytes"})
        if parts.netloc or not parts.path.startswith("/") or unknown:
            raise StoreError(
                f"Invalid SQLite store URL {url!r}; expected sqlite:///ABSOLUTE/PATH, optionally ?max_bytes=N."
            )
        max_bytes = None
        if "max_bytes" in query:
            text = query["max_bytes"][-1]
            if not text.isdigit() or int(text) < 65536:
                raise StoreError(f"Invalid max_bytes {text!r} in {url!r}; expected a whole number of bytes >= 65536.")
            max_bytes = int(text)
        return cls(Path(parts.path), max_bytes=max_bytes)

    def _db(self) -> sqlite3.Connection:
        """This thread's connection."""
        return self._file.connection()

    # -- JobStore -------------------------------------------------------------------------------
    def submit(self, job_id: str, payload: bytes, meta: Mapping[str, Any], now: float) -> None:
        """Group commit: the first submitter commits every submit waiting meanwhile in one transaction.

        With ``synchronous=FULL`` each commit is an fsync; concurrent submits share one instead of
        queueing for the write lock one fsync at a time.
        """
        entry = _Pending((job_id, payload, json.dumps(meta), now))
        with self._lock:
            self._pending.append(entry)
            leader = not self._committing
            self._committing = True
        if leader:
            while True:
                with self._lock:
                    batch, self._pending = self._pending, []
                    if not batch:
                        self._committing = False
                        break
                self._commit(batch)
        entry.done.wait()
        if entry.error is not None:
            raise entry.error

    def _commit(self, batch: list[_Pending]) -> None:
        insert = "INSERT INTO jobs (id, status, payload, meta, submitted) VALUES (?, 'in_queue', ?, ?, ?)"
        try:
            with self._file.errors("written"), self._file.transaction() as db:
                db.executemany(insert, [entry.row for entry in batch])
        except StoreError as exc:
            if len(batch) == 1:
                batch[0].error = exc
            else:  # one submit that does not fit must not fail the others: each on its own
                for entry in batch:
                    try:
                        with self._file.errors("written"):
                            self._db().execute(insert, entry.row)
                    except StoreError as single:
                        entry.error = single
        except BaseException as exc:  # never leave a waiting submitter hanging
            for entry in batch:
                entry.error = StoreError(
                    f"The job store {self.path} could not be written: {exc!r}.",
                    public="the job store could not be written (the server log has the details)",
                )
        for entry in batch:
            entry.done.set()

    def state(self, job_id: str) -> JobState | None:
        """As ``JobStore.state``."""
        with self._file.errors("read"):
            row = (
                self._db()
                .execute("SELECT status, result, error, finished FROM jobs WHERE id = ?", (job_id,))
                .fetchone()
            )
        if row is None:
            return None
        return JobState(job_id, row[0], result=row[1], error=row[2], finished=row[3])

    def claim(self, worker: str, now: float, lease: float) -> Job | None:
        """As ``JobStore.claim``."""
        with self._file.errors("written"):
            row = (
                self._db()
                .execute(
                    "UPDATE jobs SET status = 'in_progress', worker = ?, lease_until = ?, started = ?, "
                    "attempts = attempts + 1 "
                    "WHERE rowid = (SELECT rowid FROM jobs WHERE status = 'in_queue' ORDER BY rowid LIMIT 1) "
                    "RETURNING id, payload, meta, attempts",
                    (worker, now + lease, now),
                )
                .fetchone()
            )
        if row is None:
            return None
        return Job(row[0], bytes(row[1]), json.loads(row[2]), attempts=row[3])

    def renew(self, job_ids: list[str], worker: str, until: float) -> None:
        """As ``JobStore.renew``."""
        if not job_ids:
            return
        marks = ",".join("?" * len(job_ids))
        with self._file.errors("written"):
            self._db().execute(
                f"UPDATE jobs SET lease_until = ? WHERE status = 'in_progress' AND worker = ? AND id IN ({marks})",
                (until, worker, *job_ids),
            )

    def finish(self, job_id: str, worker: str, now: float, *, result: str | None, error: str | None) -> bool:
        """As ``JobStore.finish``."""
        outcome = "completed" if error is None else "failed"
        with self._file.errors("written"), self._file.transaction() as db:
            row = db.execute(
                "UPDATE jobs SET status = ?, result = ?, error = ?, finished = ?, payload = NULL, lease_until = NULL "
                "WHERE id = ? AND status = 'in_progress' AND worker = ? RETURNING submitted",
                (outcome, result, error, now, job_id, worker),
            ).fetchone()
            if row is None:
                return False
            seconds = max(0.0, now - float(row[0]))
            for bucket, add in ((latency_bucket(seconds), 0.0), (SUM_BUCKET, seconds)):
                db.execute(
                    "INSERT INTO latency (outcome, bucket, count, seconds) VALUES (?, ?, 1, ?) "
                    "ON CONFLICT (outcome, bucket) DO UPDATE SET count = count + 1, seconds = seconds + excluded.seconds",
                    (outcome, bucket, add),
                )
        return True

    def recover(self, now: float, is_dead: Callable[[str], bool]) -> list[str]:
        """As ``JobStore.recover``."""
        with self._file.errors("read"):
            rows = (
                self._db().execute("SELECT id, worker, lease_until FROM jobs WHERE status = 'in_progress'").fetchall()
            )
        back = []
        for job_id, worker, lease_until in rows:
            if (lease_until is not None and lease_until < now) or is_dead(worker or ""):
                with self._file.errors("written"):
                    cursor = self._db().execute(
                        "UPDATE jobs SET status = 'in_queue', worker = NULL, lease_until = NULL "
                        "WHERE id = ? AND status = 'in_progress' AND worker IS ?",
                        (job_id, worker),
                    )
                if cursor.rowcount:
                    back.append(job_id)
        return back

    def purge(self, before: float) -> int:
        """As ``JobStore.purge``."""
        with self._file.errors("written"):
            cursor = self._db().execute(
                "DELETE FROM jobs WHERE finished IS NOT NULL AND finished < ? AND status IN ('completed', 'failed')",
                (before,),
            )
        return cursor.rowcount

    def counts(self) -> Counts:
        """As ``JobStore.counts``."""
        counts = Counts()
        with self._file.errors("read"):
            db = self._db()
            for status, number in db.execute(
                "SELECT status, count(*) FROM jobs WHERE status IN ('in_queue', 'in_progress') GROUP BY status"
            ):
                setattr(counts, status, int(number))
            for outcome, bucket, number, seconds in db.execute("SELECT outcome, bucket, count, seconds FROM latency"):
                buckets = counts.buckets.setdefault(outcome, [0] * (len(LATENCY_BOUNDS) + 1))
                if bucket == SUM_BUCKET:
                    counts.sums[outcome] = float(seconds)
                elif 0 <= bucket < len(buckets):
                    buckets[bucket] = int(number)
        return counts

    def ping(self) -> None:
        """As ``JobStore.ping``."""
        with self._file.errors("read"):
            self._db().execute("SELECT count(*) FROM jobs WHERE 0").fetchone()

    def close(self) -> None:
        """As ``JobStore.close``."""
        self._file.close()
