"""The threads of one API: a bounded queue, the per-request stages, and the model's batcher.

User code runs only here, never on the event loop. With ``threads_per_process: 1`` (the default)
an API runs one stage of user code at a time, which is what makes module globals safe (seed 002);
a streamed response holds its thread until its last chunk.

A request's stages: ``prepare`` (payload decoding, ``pre_inference``) on one of the API's threads;
the model call through the batcher, which stacks the feeds of concurrent requests; ``finish``
(``post_inference``, response encoding) back on one of the API's threads. A thread takes every
job waiting in the queue at once (its share of them with several threads), so under load one
wake-up of a thread and one wake-up of the event loop serve many requests; with a batcher it
takes at most one batch (``max_batch_size`` items), so the model runs that batch while the
thread prepares the next instead of waiting for the whole queue to be prepared. A drained job is
claimed only as its first stage begins, so one whose deadline passes or whose client leaves while
the jobs before it run is dropped, never started; and when the jobs run long (``ANSWER_AFTER``)
those done are answered before the next begins, instead of waiting for the whole set.
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

from localserve.config import ApiConfig
from localserve.engine.batcher import Batcher, bucket_sizes
from localserve.engine.job import DROPPED, QUEUED, RUNNING, Call, Job, Outputs, settle
from localserve.engine.streams import open_stream, pump
from localserve.errors import InternalError, LocalServeError, Overloaded, ShuttingDown
from localserve.handlers import Endpoint
from localserve.logs import api_var, request_id_var
from localserve.response import Reply, answer_headers

log = logging.getLogger("localserve")

Done = list[tuple[Job, Any]]
DRAIN_LIMIT = 256  # jobs one thread takes from the queue at once
# The answers of drained jobs go out together (one wake-up of the event loop for all), unless the
# jobs run long: then those done are answered once this many seconds have passed since the last answer.
ANSWER_AFTER = 0.002


class Hooks:
    """What the pipeline reports to metrics; every hook is optional."""

    def __init__(
        self,
        depth: Callable[[int], None] | None = None,
        batch: Callable[[int], None] | None = None,
        stage: Callable[[str, float], None] | None = None,
        phases: Callable[[list[float]], None] | None = None,
    ) -> None:
        self.depth = depth
        self.batch = batch
        self.stage = stage
        self.phases = phases  # once per job answered 2xx, with its ``Job.times``


class Pipeline:
    """The worker threads of one API and the batcher of its model."""

    def __init__(self, api: ApiConfig, endpoint: Endpoint, hooks: Hooks | None = None) -> None:
        self.api = api
        self.name = api.name
        self.endpoint = endpoint
        self.threads = api.threads_per_process
        self.max_queue = api.max_queue
        self.hooks = hooks or Hooks()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.batcher: Batcher | None = None
        self.list_batching = False  # predictors with batching get lists of payloads
        self.reading = 0  # requests whose body is being read (event loop only)
        self._queue: queue.SimpleQueue[Job | Outputs | Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._depth = 0  # queued jobs neither started nor dropped
        self._preparing = 0  # claimed jobs not yet handed to the model
        self._workers: list[threading.Thread] = []
        self.drain_limit = DRAIN_LIMIT - 1  # items a thread takes from the queue besides the one it waited for
        self._closing = False
        self._affinity: set[int] | None = None
        self._pinned = threading.local()
        # Set to measure the thread's CPU time per request once (see ``measure``); None otherwise.
        self.measured: Callable[[float], None] | None = None
        self._cpu = 0.0
        self._jobs = 0  # requests this thread drained since ``measure``
        self._counted = 0  # of which measured

    @property
    def depth(self) -> int:
        """How many requests are queued: admitted, neither started nor dropped."""
        return self._depth

    # -- set-up -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the API's worker threads."""
        for index in range(self.threads):
            thread = threading.Thread(target=self._work, name=f"localserve-{self.name}-{index}", daemon=True)
            thread.start()
            self._workers.append(thread)

    def call(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run ``fn`` on one of the API's threads (loading, warming up: before traffic)."""
        call = Call(fn)
        self._queue.put(call)
        return call.future

    def attach_model(self) -> None:
        """After loading: set up dynamic batching for the endpoint's model (warming every batch size)."""
        batching = self.api.batching
        if batching is None:
            return
        model = getattr(self.endpoint, "model", None)
        if getattr(self.endpoint, "batches_lists", False) or model is None:
            self.list_batching = True
            return
        self.batcher = Batcher(
            self.name,
            model,
            buckets=bucket_sizes(batching.max_batch_size, batching.batch_sizes),
            interval=batching.batch_interval,
            deliver=self._deliver,
            upstream=self._upstream,
            observe=self.hooks.batch,
            observe_run=None if self.hooks.stage is None else lambda s: self.hooks.stage("inference", s),  # type: ignore[misc]
        )
        self.batcher.warm()
        self.batcher.start()
        self.drain_limit = self.batcher.max_rows - 1

    def measure(self, report: Callable[[float], None]) -> None:
        """Call ``report`` once, on the API's thread, with the CPU seconds a request takes on it.

        Measured with ``time.thread_time`` over ``MEASURE_JOBS`` requests after ``MEASURE_AFTER``
        (the first calls warm caches and code paths); it counts what runs on the thread with or
        without the GIL (decoding, the model when it runs inline), not the waits.
        """
        self._cpu, self._jobs, self._counted = 0.0, 0, 0
        self.measured = report

    MEASURE_AFTER = 50
    MEASURE_JOBS = 500

    def pin(self, cpus: set[int]) -> None:
        """Run the threads on ``cpus`` from their next job on (``--pin-threads``)."""
        self._affinity = set(cpus)

    def stop(self) -> None:
        """End the threads once the work they hold is done; nothing queued starts any more."""
        if self._closing:
            return
        self._closing = True
        for _ in self._workers:
            self._queue.put(None)
        if self.batcher is not None:
            self.batcher.stop()

    def join(self, timeout: float) -> list[str]:
        """After ``stop``: wait up to ``timeout`` seconds for the API's threads to end; the names of those still running.

        A thread still running holds a load or a request, maybe inside a runtime's native code,
        which the interpreter's exit would pull its libraries from under ("terminate called
        without an active exception", exit 134): the server then ends with ``os._exit``.
        """
        threads = list(self._workers)
        if self.batcher is not None and self.batcher.thread is not None:
            threads.append(self.batcher.thread)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread.name for thread in threads if thread.is_alive()]

    # -- the event loop's side ----------------------------------------------------------------
    def submit(self, job: Job) -> None:
        """Queue a job, or raise Overloaded (503) at once when the queue is full."""
        if self._closing:
            raise ShuttingDown()
        with self._lock:
            if self._depth >= self.max_queue:
                raise Overloaded(self.name, self.max_queue)
            self._depth += 1
            depth = self._depth
        if self.hooks.depth is not None:
            self.hooks.depth(depth)
        job.times.append(time.perf_counter())
        self._queue.put(job)

    def drop(self, job: Job) -> bool:
        """Withdraw a job that has not started (deadline, client gone, shutdown). True if it never runs."""
        with self._lock:
            if job.state != QUEUED:
                return False
            job.state = DROPPED
            self._depth -= 1
            depth = self._depth
        job.request = None  # type: ignore[assignment]  # the body may be large; the job is skipped
        if self.hooks.depth is not None:
            self.hooks.depth(depth)
        return True

    def full(self) -> bool:
        """Whether the queue holds ``max_queue`` requests (the next one is a 503)."""
        return self._depth >= self.max_queue

    # -- the worker threads -------------------------------------------------------------------
    def _upstream(self) -> int:
        """Requests still on their way to the model: being read, queued, or being prepared."""
        return self.reading + self._depth + self._preparing

    def _work(self) -> None:
        api_var.set(self.name)  # log records of this thread name the API
        get, get_nowait = self._queue.get, self._queue.get_nowait
        while True:
            items = [get()]
            limit = self.drain_limit
            share = limit if self.threads == 1 else self._queue.qsize() // self.threads
            for _ in range(min(share, limit)):
                try:
                    items.append(get_nowait())
                except queue.Empty:
                    break
            try:
                measuring = self.measured is not None
                start = time.thread_time() if measuring else 0.0
                stop = self._handle(items)
                if measuring:
                    self._sample(items, time.thread_time() - start)
                if stop:
                    return
            except BaseException as exc:  # a bug of ours: answer what this thread held, and keep serving
                log.error("api %r: internal error in the pipeline", self.name, exc_info=exc)
                self._settle_quietly([(item, InternalError(exc)) for item in items if isinstance(item, Job)])
            del items  # nothing of a finished request stays referenced by an idle thread

    def _sample(self, items: list[Job | Outputs | Call | None], cpu: float) -> None:
        if any(isinstance(item, Call) for item in items):
            return  # loading or warming up, not serving
        jobs = sum(isinstance(item, Job) for item in items)
        if self._jobs < self.MEASURE_AFTER:  # this drain began before the measurement
            self._jobs += jobs
            return
        self._jobs += jobs
        self._counted += jobs
        self._cpu += cpu  # a drain of model outputs alone (batching) adds their last stage's CPU
        if self._counted >= self.MEASURE_JOBS:
            report, self.measured = self.measured, None
            if report is not None:
                report(self._cpu / self._counted)

    def _handle(self, items: list[Job | Outputs | Call | None]) -> bool:
        """Run one drained set of work items; True when told to stop."""
        if self._affinity is not None and getattr(self._pinned, "cpus", None) != self._affinity:
            os.sched_setaffinity(0, self._affinity)  # 0: this thread
            self._pinned.cpus = self._affinity
        stop = False
        fresh: list[Job] = []
        done: Done = []
        for item in items:
            if item is None:
                stop = True
            elif isinstance(item, Job):
                fresh.append(item)
            elif isinstance(item, Outputs):
                self._finish_all(item.outcomes, done)
            else:
                item.run()
        if fresh:
            self._begin(fresh, done)
        self._settle(done)
        return stop

    def _claim(self, jobs: list[Job]) -> list[Job]:
        """Claim ``jobs`` at once (list batching: they start together); those not dropped meanwhile."""
        claimed = []
        with self._lock:
            for job in jobs:
                if job.state == QUEUED:
                    job.state = RUNNING
                    job.times.append(time.perf_counter())
                    claimed.append(job)
            self._depth -= len(claimed)
            self._preparing += len(claimed)
        return claimed

    def _start(self, job: Job) -> bool:
        """Claim one drained job as its first stage begins; False when it was dropped meanwhile.

        Jobs are claimed one by one, not when drained: a job whose deadline passes, or whose client
        leaves, while the jobs drained before it run is dropped, never started (and answered 504
        or not at all), not run for nobody.
        """
        with self._lock:
            if job.state != QUEUED:
                return False
            job.state = RUNNING
            self._depth -= 1
            self._preparing += 1
        job.times.append(time.perf_counter())
        return True

    def _prepared(self, count: int) -> None:
        with self._lock:
            self._preparing -= count
            depth = self._depth
        if self.hooks.depth is not None:
            self.hooks.depth(depth)

    def _begin(self, jobs: list[Job], done: Done) -> None:
        if self.list_batching:
            jobs = self._claim(jobs)
            self._prepared(len(jobs))
            size = self.api.batching.max_batch_size if self.api.batching else 1
            if len(jobs) < size:
                self._gather(jobs, size)
            for start in range(0, len(jobs), size):
                self._run_lists(jobs[start : start + size], done)
            return
        endpoint = self.endpoint
        if self.batcher is None:  # each request straight through its stages
            answer_by = time.perf_counter() + ANSWER_AFTER
            started = 0
            for job in jobs:
                if not self._start(job):
                    continue
                started += 1
                self._enter(job)
                try:
                    prepared = (job.prepare or endpoint.prepare)(job.request)
                    job.times.append(time.perf_counter())
                    if not isinstance(prepared, Reply):
                        output = endpoint.infer(prepared)
                        job.times.append(time.perf_counter())
                        prepared = (job.finish or endpoint.finish)(job.request, output)
                        job.times.append(time.perf_counter())
                except BaseException as exc:
                    prepared = _error(exc, self.name)
                done.append((job, prepared))
                if time.perf_counter() > answer_by:  # slow work: answer what is done before going on
                    self._prepared(started)
                    started = 0
                    self._settle(done[:])  # the event loop gets its own list
                    done.clear()
                    answer_by = time.perf_counter() + ANSWER_AFTER
            self._prepared(started)
            return
        feeds: list[tuple[Job, Any]] = []
        claimed = 0
        for job in jobs:
            if not self._start(job):
                continue
            claimed += 1
            self._enter(job)
            try:
                prepared = (job.prepare or endpoint.prepare)(job.request)
            except BaseException as exc:
                done.append((job, _error(exc, self.name)))
                continue
            job.times.append(time.perf_counter())
            if isinstance(prepared, Reply):
                done.append((job, prepared))
            else:
                feeds.append((job, prepared))
        self._prepared(claimed)
        if feeds:
            outcomes = self.batcher.submit(feeds)
            if outcomes is not None:
                self._finish_all(outcomes, done)

    def _gather(self, jobs: list[Job], size: int) -> None:
        """Wait up to ``batch_interval`` for more jobs while others are on their way (list batching).

        Without the check a lone request would always wait out the interval: at concurrency 1 the
        batch can never grow. Requests still being read count, so under load the batch does wait.
        """
        assert self.api.batching is not None
        deadline = time.monotonic() + self.api.batching.batch_interval
        while len(jobs) < size and self.reading + self._depth > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                item = self._queue.get(timeout=remaining)
            except queue.Empty:
                return
            if not isinstance(item, Job):
                self._queue.put(item)  # a stop or a call: handled after this batch
                return
            claimed = self._claim([item])
            self._prepared(len(claimed))
            jobs.extend(claimed)

    def _run_lists(self, jobs: list[Job], done: Done) -> None:
        self._enter(jobs[0])
        if self.hooks.batch is not None:
            self.hooks.batch(len(jobs))
        try:
            results: list[Any] = list(self.endpoint.handle_batch([job.request for job in jobs]))
            if len(results) != len(jobs):
                raise RuntimeError(f"{len(results)} results for {len(jobs)} requests")
        except BaseException as exc:
            results = [_error(exc, self.name)] * len(jobs)
        for job in jobs:  # the whole batch is their prepare phase
            job.times.append(time.perf_counter())
        done.extend(zip(jobs, results, strict=True))

    def _finish_all(self, outcomes: list[tuple[Job, Any]], done: Done) -> None:
        for job, output in outcomes:
            if isinstance(output, BaseException):
                done.append((job, _error(output, self.name)))
            else:
                self._finish_one(job, output, done)

    def _finish_one(self, job: Job, output: Any, done: Done) -> None:
        self._enter(job)
        job.times.append(time.perf_counter())
        try:
            finish = job.finish or self.endpoint.finish
            done.append((job, finish(job.request, output)))
            job.times.append(time.perf_counter())
        except BaseException as exc:
            done.append((job, _error(exc, self.name)))

    def _enter(self, job: Job) -> None:
        request_id_var.set(job.request.request_id)  # api_var is set once per thread (_work)

    def _deliver(self, outcomes: list[tuple[Job, Any]]) -> None:
        """Called on the batcher's thread: the last stage goes back to the API's threads."""
        self._queue.put(Outputs(outcomes))

    def _settle(self, done: Done) -> None:
        """Answer finished jobs: one wake-up of the loop for all of them; streams then hold this thread.

        A job whose server lets threads write (``job.writer``) has its answer written here first,
        so the client has it before the loop wakes up to end the response.
        """
        if not done:
            return
        if self.hooks.phases is not None:
            for job, reply in done:
                if type(reply) is Reply and 200 <= reply.status < 300:
                    self.hooks.phases(job.times)
        for job, reply in done:
            writer = job.writer
            if writer is not None and type(reply) is Reply and reply.stream is None and reply.asgi is None:
                if not job.claim():
                    continue  # answered by the loop already (its deadline, shutdown)
                headers = answer_headers(reply, job.request.request_id)
                reply.sent = writer.write(reply.status, headers, reply.body)
        if self.batcher is not None:
            self.batcher.flush()  # a model call this thread made, reported once its answers are written
        streams = [(job, reply) for job, reply in done if isinstance(reply, Reply) and reply.stream is not None]
        for job, _ in streams:
            open_stream(job)
        try:
            done[0][0].loop.call_soon_threadsafe(settle, done)
        except RuntimeError:  # the loop is closed: the server is gone
            return
        for job, reply in streams:
            self._enter(job)
            pump(job, reply)

    def _settle_quietly(self, done: Done) -> None:
        if done:
            try:
                done[0][0].loop.call_soon_threadsafe(settle, done)
            except RuntimeError:
                pass


def _error(exc: BaseException, api: str) -> BaseException:
    """The exception to answer with, its traceback dropped (it would keep the request alive)."""
    if isinstance(exc, LocalServeError):
        exc.__context__ = exc.__cause__ = None  # chained exceptions' frames would keep the request alive
        return exc.with_traceback(None)
    # A bug of ours (or sys.exit in user code): never leave a client hanging.
    log.error("internal error while serving api %r", api, exc_info=exc)
    return InternalError(exc)


__all__ = ["DROPPED", "QUEUED", "RUNNING", "Hooks", "Pipeline"]
