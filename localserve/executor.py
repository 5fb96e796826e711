"""Per-API worker threads behind a bounded queue: admission (503), dropping of abandoned work, batching.

User code runs only here, never on the event loop. With ``threads_per_process: 1`` (the default)
an API handles one request at a time, which is what makes module globals safe (seed 002).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from localserve.config import BatchingConfig
from localserve.errors import LocalServeError, Overloaded
from localserve.request import Request
from localserve.response import Reply

log = logging.getLogger("localserve")

QUEUED, RUNNING, DROPPED = 0, 1, 2
Result = Reply | LocalServeError


class Job:
    """One request waiting for, or running on, a worker thread."""

    __slots__ = ("future", "loop", "request", "state")

    def __init__(self, request: Request, loop: asyncio.AbstractEventLoop) -> None:
        self.request = request
        self.loop = loop
        self.future: asyncio.Future[Result] = loop.create_future()
        self.state = QUEUED


class _Call:
    """A function to run on a worker thread (loading user code and models)."""

    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()


def _resolve(future: asyncio.Future[Result], result: Result) -> None:
    if not future.done():
        future.set_result(result)


class Executor:
    """Worker threads of one API.

    ``process`` handles a list of requests (one, or a batch when ``batching`` is set) and
    returns one Reply or LocalServeError per request, in order.
    """

    def __init__(
        self,
        name: str,
        process: Callable[[list[Request]], list[Result]],
        *,
        threads: int = 1,
        max_queue: int = 100,
        batching: BatchingConfig | None = None,
        on_batch: Callable[[int], None] | None = None,
        pending: Callable[[], int] | None = None,
        on_depth: Callable[[int], None] | None = None,
    ) -> None:
        self.name = name
        self.process = process
        self.threads = threads
        self.max_queue = max_queue
        self.batching = batching
        self.on_batch = on_batch
        self.pending = pending  # requests of this API the server holds; a batch waits only for those
        self.on_depth = on_depth  # told the queue depth whenever it changes (the queue-depth gauge)
        self._queue: queue.SimpleQueue[Job | _Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0  # queued jobs that are neither started nor dropped
        self._running = 0
        self._workers: list[threading.Thread] = []
        self._affinity: set[int] | None = None  # CPUs the workers move to before their next request
        self._pinned = threading.local()

    @property
    def depth(self) -> int:
        return self._pending

    @property
    def busy(self) -> int:
        return self._running

    def start(self) -> None:
        for index in range(self.threads):
            thread = threading.Thread(target=self._work, name=f"localserve-{self.name}-{index}", daemon=True)
            thread.start()
            self._workers.append(thread)

    def call(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run ``fn`` on a worker thread (ahead of no one: used for loading before traffic)."""
        call = _Call(fn)
        self._queue.put(call)
        return call.future

    def submit(self, request: Request, loop: asyncio.AbstractEventLoop) -> Job:
        """Queue a request, or raise Overloaded (503) at once when the queue is full."""
        job = Job(request, loop)
        with self._lock:
            if self._pending >= self.max_queue:
                raise Overloaded(
                    f"API {self.name!r} is at capacity: {self.max_queue} requests are already queued "
                    f"(max_queue); retry later."
                )
            self._pending += 1
            depth = self._pending
        if self.on_depth is not None:
            self.on_depth(depth)
        self._queue.put(job)
        return job

    def drop(self, job: Job) -> bool:
        """Withdraw a job that has not started (timeout, client gone). True if it will never run."""
        with self._lock:
            if job.state == QUEUED:
                job.state = DROPPED
                self._pending -= 1
                job.request = None  # type: ignore[assignment]  # the body may be large; the job is skipped
                depth = self._pending
            else:
                return False
        if self.on_depth is not None:
            self.on_depth(depth)
        return True

    def pin(self, cpus: set[int]) -> None:
        """Run the worker threads on ``cpus`` from their next request on (see App.pin_threads)."""
        self._affinity = set(cpus)

    def stop(self, timeout: float | None = None) -> None:
        """Let running work finish (queued work still runs), then end the threads."""
        for _ in self._workers:
            self._queue.put(None)
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._workers:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self._workers.clear()

    # -- worker side ---------------------------------------------------------------------------
    def _claim(self, item: Job) -> bool:
        with self._lock:
            if item.state != QUEUED:
                return False
            item.state = RUNNING
            self._pending -= 1
            depth = self._pending
        if self.on_depth is not None:
            self.on_depth(depth)
        return True

    def _work(self) -> None:
        get = self._queue.get
        max_size = self.batching.max_batch_size if self.batching else 1
        interval = self.batching.batch_interval if self.batching else 0.0
        while True:
            item = get()
            if item is None:
                return
            if isinstance(item, _Call):
                self._run_call(item)
                continue
            if not self._claim(item):
                continue
            jobs = [item]
            if max_size > 1:
                stop_after: _Call | None = None
                closing = False
                deadline = time.monotonic() + interval
                while len(jobs) < max_size:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0 or not self._more_expected(len(jobs)):
                            break
                        try:
                            more = self._queue.get(timeout=remaining)
                        except queue.Empty:
                            break
                    if more is None:
                        closing = True
                        break
                    if isinstance(more, _Call):
                        stop_after = more
                        break
                    if self._claim(more):
                        jobs.append(more)
                self._run_jobs(jobs)
                if stop_after is not None:
                    self._run_call(stop_after)
                if closing:
                    return
            else:
                self._run_jobs(jobs)

    def _more_expected(self, taken: int) -> bool:
        """Whether waiting can fill the batch: other requests are inside the server, not yet queued.

        Without this a lone request would always wait out ``batch_interval`` (at concurrency 1 the
        batch can never grow). Requests still being read count, so under load the batch does wait.
        """
        if self.pending is None:
            return True
        return self.pending() - taken - self._running > 0

    def _run_call(self, call: _Call) -> None:
        if not call.future.set_running_or_notify_cancel():
            return
        try:
            call.future.set_result(call.fn())
        except BaseException as exc:
            call.future.set_exception(exc)

    def _run_jobs(self, jobs: list[Job]) -> None:
        with self._lock:
            self._running += len(jobs)
        try:
            if self._affinity is not None and getattr(self._pinned, "cpus", None) != self._affinity:
                os.sched_setaffinity(0, self._affinity)  # 0: this thread
                self._pinned.cpus = self._affinity
            if self.on_batch is not None and self.batching is not None:
                self.on_batch(len(jobs))
            results = self.process([job.request for job in jobs])
            if len(results) != len(jobs):
                raise RuntimeError(f"{len(results)} results for {len(jobs)} requests")
        except LocalServeError as exc:
            results = [exc] * len(jobs)
        except BaseException as exc:  # a bug of ours (or sys.exit in user code): never leave a client hanging
            log.exception("internal error while processing a request of api %r", self.name)
            results = [LocalServeError(f"Internal error: {type(exc).__name__}: {exc}")] * len(jobs)
        finally:
            with self._lock:
                self._running -= len(jobs)
        for job, result in zip(jobs, results, strict=True):
            try:
                job.loop.call_soon_threadsafe(_resolve, job.future, result)
            except RuntimeError:  # the loop is closed: the server is gone
                pass
