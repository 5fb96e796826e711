"""An AsyncAPI's jobs: what a job store does (JobStore), the records it keeps, the workers' ids.

A job moves ``in_queue`` → ``in_progress`` (claimed by one worker, under a lease that it renews) → ``completed`` or
``failed``. A job whose lease ran out, or whose worker is a process of this machine that is gone, goes back to
``in_queue`` (at-least-once, as SQS gave Cortex). Finished jobs are purged once ``retention`` has passed.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from localserve.errors import LocalServeError

STATUSES = ("in_queue", "in_progress", "completed", "failed")
JOB_ID_RE = re.compile(r"[0-9a-f]{32}")  # whole: fullmatch (``$`` would let a trailing newline through)
# Latency buckets of the job histogram (seconds, submit to finish): jobs run for seconds to hours.
LATENCY_BOUNDS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class StoreError(LocalServeError):
    """The job store cannot be read or written (unreachable, full, broken); a submit answers 503.

    The message, for the log, names the store (its file, its address); ``public``, what a client is
    told, names neither (even without --hide-errors: they are the server's, not the request's).
    """

    status_code = 503

    def __init__(self, message: str, *, public: str | None = None) -> None:
        super().__init__(message)
        self.public = public or "the job store could not be used (the server log has the details)"


@dataclass(frozen=True)
class Job:
    """A claimed job: what ``predict`` needs to run it."""

    id: str
    payload: bytes
    meta: Mapping[str, Any] = field(default_factory=dict)  # content_type, query_params, headers
    attempts: int = 1  # how many times it was claimed, this time included


@dataclass(frozen=True)
class JobState:
    """What ``GET /<api>/<id>`` reports."""

    id: str
    status: str  # in_queue | in_progress | completed | failed
    result: str | None = None  # the result as JSON text (completed)
    error: str | None = None  # the message (failed)
    finished: float | None = None  # epoch seconds (completed, failed)


@dataclass
class Counts:
    """Queue figures and the job-latency histogram (cumulative since the store was made)."""

    in_queue: int = 0
    in_progress: int = 0
    buckets: dict[str, list[int]] = field(default_factory=dict)  # outcome -> count per LATENCY_BOUNDS + +Inf
    sums: dict[str, float] = field(default_factory=dict)  # outcome -> seconds


class JobStore(Protocol):
    """One AsyncAPI's jobs. Every method raises StoreError when the store cannot be used."""

    url: str  # where it lives, for messages (no password)

    def submit(self, job_id: str, payload: bytes, meta: Mapping[str, Any], now: float) -> None:
        """Store a new job ``in_queue``; it is durable when this returns."""

    def state(self, job_id: str) -> JobState | None:
        """The job's state, or None when there is no such job (never submitted, or purged)."""

    def claim(self, worker: str, now: float, lease: float) -> Job | None:
        """The oldest queued job, now ``in_progress`` for ``worker`` until ``now + lease``; atomic across processes."""

    def renew(self, job_ids: list[str], worker: str, until: float) -> None:
        """Extend the leases of ``worker``'s jobs."""

    def finish(self, job_id: str, worker: str, now: float, *, result: str | None, error: str | None) -> bool:
        """Record the outcome; False when the job is no longer this worker's (it was recovered meanwhile)."""

    def recover(self, now: float, is_dead: Callable[[str], bool]) -> list[str]:
        """Put back in the queue every ``in_progress`` job whose lease ran out or whose worker is dead."""

    def purge(self, before: float) -> int:
        """Delete finished jobs that finished before ``before``; how many."""

    def counts(self) -> Counts:
        """Queue length and the latency histogram."""

    def ping(self) -> None:
        """Raise StoreError unless the store answers."""

    def close(self) -> None:
        """Release connections."""


def new_job_id() -> str:
    """A new job id: 32 lower-case hex characters (a random UUID)."""
    return uuid.uuid4().hex


def rfc3339(epoch: float) -> str:
    """``2026-11-23T05:18:02.123Z``."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def latency_bucket(seconds: float) -> int:
    """Index of the first LATENCY_BOUNDS bound at or above ``seconds`` (len(LATENCY_BOUNDS) for +Inf)."""
    for index, bound in enumerate(LATENCY_BOUNDS):
        if seconds <= bound:
            return index
    return len(LATENCY_BOUNDS)


# -- workers: who holds a job, and whether it is still alive --------------------------------------
def _start_ticks(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux), so a reused pid is told apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def worker_id() -> str:
    """``host:pid:start:random``: unique per worker, and enough for another process here to see it is gone."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or '-'}:{uuid.uuid4().hex[:8]}"


def worker_is_dead(worker: str) -> bool:
    """True when ``worker`` ran on this machine and its process is gone; False when alive or elsewhere."""
    host, _, rest = worker.partition(":")
    pid_text, _, rest = rest.partition(":")
    start = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's worker: only its lease tells
    pid = int(pid_text)
    if start != "-":
        return _start_ticks(pid) != start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
