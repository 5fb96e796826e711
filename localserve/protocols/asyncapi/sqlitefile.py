"""One SQLite file used from many threads and processes: WAL switched on and the schema created while
another replica does the same, one connection per thread, ``BEGIN IMMEDIATE`` transactions, and every
sqlite error turned into a StoreError in words (a full store says so).

Closing never pulls a connection from under its thread. Python's sqlite3 does not guard a connection
that one thread closes while another runs a statement on it: the process dies with a segmentation
fault (seen in CI: a job's outcome stored from an API thread while the server stopped and closed the
store). So every use of the file is a step (``errors``) that counts its thread as busy; ``close``
closes the connections of idle threads at once, and a busy thread closes its own as its step ends.
A step begun after ``close`` is a StoreError saying the store is closed.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from localserve.protocols.asyncapi.jobs import StoreError


class SqliteFile:
    """The connections to one SQLite file (``synchronous=FULL``, at most ``max_bytes`` when given)."""

    def __init__(self, path: Path, schema: str, *, max_bytes: int | None = None) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._connections: dict[int, sqlite3.Connection] = {}  # by thread ident
        self._busy: dict[int, int] = {}  # thread ident -> steps it is inside
        self._closed = False
        self._lock = threading.Lock()
        with self.errors("opened"):
            path.parent.mkdir(parents=True, exist_ok=True)
            _create(self.connection(), schema)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on its first use; only inside a step (``errors``)."""
        me = threading.get_ident()
        db = self._connections.get(me)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            with self._lock:
                self._connections[me] = db  # before its first statement: closed by its thread if the file closes
            db.execute("PRAGMA synchronous=FULL")  # an id is given only for a job that is on disk
            db.execute("PRAGMA busy_timeout=30000")
            if self.max_bytes is not None:
                page = int(db.execute("PRAGMA page_size").fetchone()[0])
                db.execute(f"PRAGMA max_page_count={max(16, self.max_bytes // page)}")
        return db

    @contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """One step on the file: sqlite and OS errors inside as a StoreError ('... could not be <doing>', or that
        the store is full); refused once the file is closed, and this thread's connection closed at its end then."""
        me = threading.get_ident()
        with self._lock:
            if self._closed:
                raise StoreError(
                    f"The job store {self.path} could not be {doing}: it is closed (the server is stopping).",
                    public="the server is stopping",
                )
            self._busy[me] = self._busy.get(me, 0) + 1
        try:
            with self._translated(doing):
                yield
        finally:
            with self._lock:
                left = self._busy.pop(me) - 1
                if left:
                    self._busy[me] = left
                db = self._connections.pop(me, None) if self._closed and not left else None
            if db is not None:
                db.close()

    @contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
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
        """Close the connections of the threads not inside a step now; the others close theirs as their step ends."""
        with self._lock:
            self._closed = True
            idle = [me for me in self._connections if me not in self._busy]
            connections = [self._connections.pop(me) for me in idle]
        for db in connections:
            db.close()


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
