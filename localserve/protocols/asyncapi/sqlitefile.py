"""One SQLite file used from many threads and processes: WAL switched on and the schema created while
another replica does the same, one connection per thread (closed together), ``BEGIN IMMEDIATE``
transactions, and every sqlite error turned into a StoreError in words (a full store says so)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from localserve.protocols.asyncapi.store import StoreError


class SqliteFile:
    """The connections to one SQLite file (``synchronous=FULL``, at most ``max_bytes`` when given)."""

    def __init__(self, path: Path, schema: str, *, max_bytes: int | None = None) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        with self.errors("opened"):
            path.parent.mkdir(parents=True, exist_ok=True)
            _create(self.connection(), schema)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on its first use."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA synchronous=FULL")  # an id is given only for a job that is on disk
            db.execute("PRAGMA busy_timeout=30000")
            if self.max_bytes is not None:
                page = int(db.execute("PRAGMA page_size").fetchone()[0])
                db.execute(f"PRAGMA max_page_count={max(16, self.max_bytes // page)}")
            self._local.db = db
            with self._lock:
                self._connections.append(db)
        return db

    @contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """sqlite and OS errors inside as a StoreError: '... could not be <doing>', or that the store is full."""
        try:
            yield
        except sqlite3.Error as exc:
            text = str(exc)
            if isinstance(exc, sqlite3.OperationalError) and "full" in text:
                limit = f" (max_bytes={self.max_bytes})" if self.max_bytes else ""
                raise StoreError(
                    f"The job store {self.path} is full{limit}: {text}; free disk space or wait for old jobs to be purged.",
                    public=f"the job store is full{limit}; try again once old jobs are purged",
                ) from exc
            raise StoreError(f"The job store {self.path} could not be {doing}: {text}.", public=_public(doing)) from exc
        except OSError as exc:
            raise StoreError(f"The job store {self.path} could not be {doing}: {exc}.", public=_public(doing)) from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection inside ``BEGIN IMMEDIATE`` (the write lock first), committed at the end."""
        db = self.connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.in_transaction:  # SQLite rolls back by itself on some errors (SQLITE_FULL)
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            connections, self._connections = self._connections, []
        for db in connections:
            db.close()
        self._local = threading.local()


def _create(db: sqlite3.Connection, schema: str) -> None:
    """Switch the file to WAL and create the tables, also while another replica does the same.

    Two processes opening a new file at once can be refused at once, without the busy timeout
    ("database is locked": the switch to WAL, or a read lock that cannot become a write lock), so
    a refusal is tried again for up to 30 s; the tables are created under ``BEGIN IMMEDIATE``,
    which takes the write lock first and so waits like any other write.
    """
    deadline = time.monotonic() + 30.0
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(f"BEGIN IMMEDIATE;{schema}COMMIT;")
            return
        except sqlite3.OperationalError as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            text = str(exc)
            if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _public(doing: str) -> str:
    """What a client is told of a store that could not be ``doing``: no path (the log has it)."""
    return f"the job store could not be {doing} (the server log has the details)"
