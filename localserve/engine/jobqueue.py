"""The bounded queue of one API: what is admitted, queued, claimed, and still on its way to the model.

The event loop submits and drops jobs; the API's threads take them off ``items`` and claim them
as their first stage begins. Counts change under one lock, so a job is started or dropped, never
both: a job dropped while it waited (deadline, client gone, shutdown) is skipped by the thread.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from types import TracebackType

from localserve.engine.handoff import LastIdleFirst
from localserve.engine.job import DROPPED, QUEUED, RUNNING, Call, Job, Outputs
from localserve.errors import Overloaded, ShuttingDown

Item = Job | Outputs | Call | None  # None tells a thread to stop


class Admission:
    """An admitted request whose body is being read: counted against the queue until it is queued."""

    __slots__ = ("queue",)

    def __init__(self, queue: JobQueue) -> None:
        self.queue = queue

    def __enter__(self) -> None:
        self.queue.reading += 1

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.queue.reading -= 1


class JobQueue:
    """The jobs of one API between admission and the model, and the work items of its threads."""

    def __init__(
        self,
        name: str,
        max_queue: int,
        on_depth: Callable[[int], None] | None,
        threads: int = 1,
    ) -> None:
        self.name = name
        self.max_queue = max_queue
        self.on_depth = on_depth  # told the depth when it changes (replicas write it to their metrics)
        # Several threads: the one woken for an item is the one idle the shortest time (``LastIdleFirst``).
        self.items: queue.SimpleQueue[Item] | LastIdleFirst[Item] = (
            queue.SimpleQueue() if threads == 1 else LastIdleFirst()
        )
        self.reading = 0  # requests whose body is being read (event loop only)
        self.depth = 0  # queued jobs neither started nor dropped
        self.preparing = 0  # claimed jobs not yet handed to the model
        self.closing = False
        self._lock = threading.Lock()

    # -- the event loop's side ----------------------------------------------------------------
    def submit(self, job: Job) -> None:
        """Queue a job, or raise Overloaded (503) at once when the queue is full."""
        if self.closing:
            raise ShuttingDown()
        with self._lock:
            if self.depth >= self.max_queue:
                raise Overloaded(self.name, self.max_queue)
            self.depth += 1
            depth = self.depth
        if self.on_depth is not None:
            self.on_depth(depth)
        job.times.append(time.perf_counter())
        self.items.put(job)

    def accept(self, item: Item) -> bool:
        """Queue a call for the threads, unless they were told to end (``close``): then nothing would run it."""
        with self._lock:
            if self.closing:
                return False
            self.items.put(item)
        return True

    def close(self, threads: int) -> bool:
        """Tell ``threads`` threads to end once what is queued is done; False when they were told already."""
        with self._lock:
            if self.closing:
                return False
            self.closing = True
            for _ in range(threads):
                self.items.put(None)
        return True

    def drop(self, job: Job) -> bool:
        """Withdraw a job that has not started (deadline, client gone, shutdown). True if it never runs."""
        with self._lock:
            if job.state != QUEUED:
                return False
            job.state = DROPPED
            self.depth -= 1
            depth = self.depth
        job.request = None  # type: ignore[assignment]  # the body may be large; the job is skipped
        if self.on_depth is not None:
            self.on_depth(depth)
        return True

    def full(self) -> bool:
        """Whether the queue holds ``max_queue`` requests (the next one is a 503)."""
        return self.depth >= self.max_queue

    # -- the threads' side --------------------------------------------------------------------
    def upstream(self) -> int:
        """Requests still on their way to the model: being read, queued, or being prepared."""
        return self.reading + self.depth + self.preparing

    def claim(self, jobs: list[Job]) -> list[Job]:
        """Claim ``jobs`` at once (list batching: they start together); those not dropped meanwhile."""
        claimed = []
        with self._lock:
            for job in jobs:
                if job.state == QUEUED:
                    job.state = RUNNING
                    job.times.append(time.perf_counter())
                    claimed.append(job)
            self.depth -= len(claimed)
            self.preparing += len(claimed)
        return claimed

    def start(self, job: Job) -> bool:
        """Claim one drained job as its first stage begins; False when it was dropped meanwhile.

        Jobs are claimed one by one, not when drained: a job whose deadline passes, or whose client
        leaves, while the jobs drained before it run is dropped, never started (and answered 504
        or not at all), not run for nobody.
        """
        with self._lock:
            if job.state != QUEUED:
                return False
            job.state = RUNNING
            self.depth -= 1
            self.preparing += 1
        job.times.append(time.perf_counter())
        return True

    def prepared(self, count: int) -> None:
        """``count`` claimed jobs reached the model (or their answer)."""
        with self._lock:
            self.preparing -= count
            depth = self.depth
        if self.on_depth is not None:
            self.on_depth(depth)
