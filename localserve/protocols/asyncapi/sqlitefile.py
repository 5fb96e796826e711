"""One SQLite file used from many threads and processes: WAL switched on and the schema created while another replica
does the same, one connection per thread, ``BEGIN IMMEDIATE`` transactions, and every sqlite error turned into a
StoreError in words (a full store says so).

Closing never pulls a connection from under its thread: Python's sqlite3 segfaults when one thread closes a connection
another is using. So every use of the file is a step (``errors``) that counts its thread as busy; ``close`` closes idle
threads' connections at once, a busy thread its own as its step ends, and a step begun after ``close`` is a StoreError.

Each step first checks (a few ``stat`` calls) that the database is the one it opened and its ``-shm`` file neither
shrank nor was replaced, and that both can be written: a truncated or read-only ``-shm`` kills the process with SIGBUS
on its next touch, and a deleted database swallows every write. Otherwise the store is *broken*: every later step is a
StoreError (submits answer 503, ``/readyz`` says why), its connections are never touched again, and one error line says
what became of the jobs. A change racing a running step is not caught.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from localserve.protocols.asyncapi.jobs import StoreError

log = logging.getLogger("localserve")
BROKEN = (
    "the job store's files were deleted or changed while the server ran; new jobs cannot be kept until the server "
    "is restarted (the server log has the details)"
)


class SqliteFile:
    """The connections to one SQLite file (``synchronous=FULL``, at most ``max_bytes`` when given)."""

    def __init__(self, path: Path, schema: str, *, max_bytes: int | None = None) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._connections: dict[int, sqlite3.Connection] = {}  # by thread ident
        self._busy: dict[int, int] = {}  # thread ident -> steps it is inside
        self._closed = False
        self._lock = threading.Lock()
        self._broken: StoreError | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the database file opened
        self._shm: tuple[int, int, int] | None = None  # (device, inode, largest size seen) of its -shm file
        with self.errors("opened"):
            path.parent.mkdir(parents=True, exist_ok=True)
            _create(self.connection(), schema)
            found = os.stat(path)
            self._identity = (found.st_dev, found.st_ino)

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
            if self._broken is not None:
                raise self._broken
            self._busy[me] = self._busy.get(me, 0) + 1
        try:
            self._check_files(doing)
            with self._translated(doing):
                yield
        finally:
            with self._lock:
                left = self._busy.pop(me) - 1
                if left:
                    self._busy[me] = left
                db = self._connections.pop(me, None) if self._closed and not left and self._broken is None else None
            if db is not None:
                db.close()

    def _check_files(self, doing: str) -> None:
        """Break the store (see the module doc) when its files are no longer the ones it opened, or cannot be
        written; before a first step has recorded them, nothing to compare."""
        if self._identity is None:
            return
        why = _changed_database(self.path, self._identity)
        fate = "the jobs it held are lost with it (their ids answer 404 once the server restarts with a new store)"
        if why is None:
            why = self._changed_shm(Path(f"{self.path}-shm"))
            fate = "the jobs it holds stay in its file, and run once the server restarts on it"
        if why is None:
            return
        error = StoreError(f"The job store {self.path} could not be {doing}: {why}.", public=BROKEN)
        abandoned: list[sqlite3.Connection] = []
        with self._lock:
            first = self._broken is None
            if first:
                self._broken = error
                abandoned = list(self._connections.values())
                self._connections.clear()
        _abandon(abandoned)
        if first:
            log.error(
                "The job store %s is unusable: %s. It is no longer touched (SQLite maps its -shm file into memory, "
                "where a truncated or read-only file kills the process); %s; jobs running now finish, but their "
                "outcome cannot be stored; new submits answer 503 and /readyz is 503 until the server is restarted.",
                self.path,
                why,
                fate,
            )
        raise self._broken or error

    def _changed_shm(self, shm: Path) -> str | None:
        """Why the -shm file can no longer be used (gone, replaced, shrunk, read-only); None while it can."""
        try:
            found = os.stat(shm)
        except FileNotFoundError:
            return None if self._shm is None else "its shared-memory file (-shm) was deleted"
        except OSError as exc:
            return f"its shared-memory file (-shm) cannot be read ({exc})"
        with self._lock:
            seen = self._shm
            if seen is None or ((found.st_dev, found.st_ino) == seen[:2] and found.st_size >= seen[2]):
                self._shm = (found.st_dev, found.st_ino, found.st_size)
        if seen is not None and (found.st_dev, found.st_ino) != seen[:2]:
            return "its shared-memory file (-shm) was replaced by another file"
        if seen is not None and found.st_size < seen[2]:
            return f"its shared-memory file (-shm) was truncated ({seen[2]} to {found.st_size} bytes)"
        if not os.access(shm, os.W_OK) or os.statvfs(shm).f_flag & os.ST_RDONLY:
            return "its shared-memory file (-shm) cannot be written (read-only, or on a read-only file system)"
        return None

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
        """Close the connections of the threads not inside a step now; the others close theirs as their step ends.
        A broken store's connections were abandoned instead (closing one would read its shared memory)."""
        with self._lock:
            self._closed = True
            idle = [me for me in self._connections if me not in self._busy]
            connections = [self._connections.pop(me) for me in idle]
        for db in connections:
            db.close()


def _create(db: sqlite3.Connection, schema: str) -> None:
    """Switch the file to WAL and create the tables, also while another replica does the same.

    Two processes opening a new file at once can be refused without the busy timeout ("database is locked"), so a
    refusal is tried again for up to 30 s; the tables are created under ``BEGIN IMMEDIATE``, which takes the write lock
    first and so waits like any other write.
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


def _abandon(connections: list[sqlite3.Connection]) -> None:
    """Keep ``connections`` open until the process ends, at its exit too: closing one (also when it is freed)
    reads the shared memory that may now kill the process. One reference more than anyone holds."""
    import ctypes

    for db in connections:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(db))


def _changed_database(path: Path, identity: tuple[int, int]) -> str | None:
    """Why the database file is no longer the one opened (deleted, replaced); None while it is."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return "its file was deleted"
    except OSError as exc:
        return f"its file cannot be read ({exc})"
    if (found.st_dev, found.st_ino) != identity:
        return "its file was replaced by another file"
    return None


def _public(doing: str) -> str:
    """What a client is told of a store that could not be ``doing``: no path (the log has it)."""
    return f"the job store could not be {doing} (the server log has the details)"
