"""The threads of one API: a bounded queue, the per-request stages, and the model's batcher.

User code runs only here, never on the event loop. With ``threads_per_process: 1`` (the default)
an API runs one stage of user code at a time, which is what makes module globals safe (Cortex 0.10-0.11 docs, *Request handlers*);
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

import concurrent.futures
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from localserve.config import ApiConfig
from localserve.engine.answers import Done, answer, answer_quietly, as_error
from localserve.engine.batcher import Batcher
from localserve.engine.cpu import CpuMeter
from localserve.engine.feeds import bucket_sizes
from localserve.engine.job import Call, Job, Outputs
from localserve.engine.jobqueue import JobQueue
from localserve.engine.leftovers import join_all
from localserve.engine.lists import ListBatches
from localserve.engine.pinning import pin_this_thread
from localserve.engine.ports import Hooks
from localserve.engine.routing import ModelRoutes
from localserve.engine.traces import enter_span
from localserve.errors import InternalError, ShuttingDown
from localserve.handlers import Endpoint
from localserve.logs import api_var, request_id_var
from localserve.messages.response import Reply

log = logging.getLogger("localserve")

DRAIN_LIMIT = 256  # jobs one thread takes from the queue at once
# The answers of drained jobs go out together (one wake-up of the event loop for all), unless the
# jobs run long: then those done are answered once this many seconds have passed since the last answer.
ANSWER_AFTER = 0.002


class Pipeline:
    """The worker threads of one API and the batcher of its model."""

    def __init__(self, api: ApiConfig, endpoint: Endpoint, hooks: Hooks | None = None) -> None:
        self.api = api
        self.name = api.name
        self.endpoint = endpoint
        self.threads = api.threads_per_process
        self.max_queue = api.max_queue
        self.hooks = hooks or Hooks()
        self.batcher: Batcher | None = None
        self.lists: ListBatches | None = None  # predictors with batching get lists of payloads
        self.routes: ModelRoutes | None = None  # a multi-model API: V2 requests name one of its models
        self.queue = jobs = JobQueue(self.name, self.max_queue, self.hooks.depth, self.threads)
        self._queue = jobs.items
        # The queue's own methods, bound once: the event loop calls them for every request.
        self.submit, self.drop, self.full = jobs.submit, jobs.drop, jobs.full
        self._start, self._prepared, self._upstream = jobs.start, jobs.prepared, jobs.upstream
        self._workers: list[threading.Thread] = []
        self.drain_limit = DRAIN_LIMIT - 1  # items a thread takes from the queue besides the one it waited for
        self.affinity: set[int] | None = None  # the cores ``pin`` put the threads on
        self._pinned = threading.local()
        self.measured: CpuMeter | None = None  # set to measure the CPU time a request takes once (``measure``)

    # -- set-up -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the API's worker threads."""
        for index in range(self.threads):
            thread = threading.Thread(target=self._work, name=f"localserve-{self.name}-{index}", daemon=True)
            thread.start()
            self._workers.append(thread)

    def call(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run ``fn`` on one of the API's threads (loading, warming up, an AsyncAPI job); ShuttingDown once stopped."""
        call = Call(fn)
        if not self.queue.accept(call):  # nothing would run it
            call.future.set_exception(ShuttingDown())
        return call.future

    def attach_model(self) -> None:
        """After loading: set up dynamic batching for the endpoint's model (warming every batch size)."""
        batching = self.api.batching
        if self.endpoint.models is not None:
            self.routes = ModelRoutes(self)
        if batching is None:
            return
        model = self.endpoint.model
        if self.endpoint.batches_lists or model is None:
            self.lists = ListBatches(self.api, self.endpoint, self.queue, self.hooks)
            return
        self.batcher = Batcher(
            self.name,
            model,
            buckets=bucket_sizes(batching.max_batch_size, batching.batch_sizes),
            interval=batching.batch_interval,
            deliver=self.deliver,
            upstream=self._upstream,
            observe=self.hooks.batch,
            observe_run=None if self.hooks.stage is None else functools.partial(self.hooks.stage, "inference"),
            traced=self.hooks.batch_run,
        )
        self.batcher.warm()
        self.batcher.start()
        self.drain_limit = self.batcher.max_rows - 1

    def measure(self, report: Callable[[float], None]) -> None:
        """``report`` the CPU seconds a request takes on the API's thread, once (``CpuMeter``)."""
        self.measured = CpuMeter(report, self.MEASURE_AFTER, self.MEASURE_JOBS)

    MEASURE_AFTER, MEASURE_JOBS = 50, 500

    def pin(self, cpus: set[int]) -> None:
        """Run the threads on ``cpus`` from their next job on (``--pin-threads``)."""
        self.affinity = set(cpus)

    def stop(self) -> None:
        """End the threads once the work they hold is done; nothing queued starts any more."""
        if not self.queue.close(len(self._workers)):
            return
        for batcher in (self.batcher, self.routes):
            if batcher is not None:
                batcher.stop()

    def all_threads(self) -> list[threading.Thread]:
        """Every thread that may run this API's code: its workers, its batcher's, its model versions' batchers'."""
        batchers = [] if self.batcher is None or self.batcher.thread is None else [self.batcher.thread]
        return [*self._workers, *batchers, *(self.routes.all_threads() if self.routes is not None else [])]

    def join(self, timeout: float) -> list[str]:
        """After ``stop``: wait up to ``timeout`` s for the API's threads to end; those still running (see leftovers.py)."""
        return join_all(self.all_threads(), timeout)

    # -- the worker threads -------------------------------------------------------------------
    def _work(self) -> None:
        api_var.set(self.name)  # log records of this thread name the API
        get, get_nowait, qsize = self._queue.get, self._queue.get_nowait, self._queue.qsize
        while True:
            items = [get()]
            # What is queued now (a lone request finds nothing: no attempt that raises Empty), or this thread's share.
            share = qsize() if self.threads == 1 else qsize() // self.threads
            for _ in range(min(share, self.drain_limit)):
                try:
                    items.append(get_nowait())
                except queue.Empty:  # another thread of the API took it
                    break
            try:
                meter = self.measured
                start = time.thread_time() if meter is not None else 0.0
                stop = self._handle(items)
                if meter is not None and meter.sample(items, time.thread_time() - start):
                    self.measured = None
                if stop:
                    return
            except BaseException as exc:  # a bug of ours: answer what this thread held, and keep serving
                log.error("api %r: internal error in the pipeline", self.name, exc_info=exc)
                answer_quietly([(item, InternalError(exc)) for item in items if isinstance(item, Job)])
            del items  # nothing of a finished request stays referenced by an idle thread

    def _handle(self, items: list[Job | Outputs | Call | None]) -> bool:
        """Run one drained set of work items; True when told to stop."""
        if self.affinity is not None and getattr(self._pinned, "cpus", None) != self.affinity:
            pin_this_thread(self.affinity)
            self._pinned.cpus = self.affinity
        stop = False
        fresh: list[Job] = []
        done: Done = []
        for item in items:
            if item is None:
                stop = True
            elif isinstance(item, Job):
                fresh.append(item)
            elif isinstance(item, Outputs):
                self.finish_all(item.outcomes, done)
            else:
                item.run()
        if fresh:
            self._begin(fresh, done)
        answer(done, self.hooks.phases)
        return stop

    def _begin(self, jobs: list[Job], done: Done) -> None:
        """Start the first stage of freshly drained ``jobs``; what is answered already goes to ``done``."""
        if self.routes is not None and not (jobs := self.routes.take(jobs, done)):
            return
        if self.lists is not None:
            self.lists.run(jobs, done)
        elif self.batcher is None:
            self._begin_straight(jobs, done)
        else:
            self._begin_batched(self.batcher, jobs, done)

    def _begin_straight(self, jobs: list[Job], done: Done) -> None:
        """No batcher: each request straight through its stages; slow work answers what is done as it goes."""
        endpoint = self.endpoint
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
                prepared = as_error(exc, self.name)
            done.append((job, prepared))
            if time.perf_counter() > answer_by:  # slow work: answer what is done before going on
                self._prepared(started)
                started = 0
                answer(done[:], self.hooks.phases)  # the event loop gets its own list
                done.clear()
                answer_by = time.perf_counter() + ANSWER_AFTER
        self._prepared(started)

    def _begin_batched(self, batcher: Batcher, jobs: list[Job], done: Done) -> None:
        """With a batcher: prepare every job, then hand the feeds to the model in one submit."""
        endpoint = self.endpoint
        feeds: list[tuple[Job, Any]] = []
        claimed = 0
        entered = None  # the job whose context this thread is in: a lone request's last stage needs no ``_enter``
        for job in jobs:
            if not self._start(job):
                continue
            claimed += 1
            self._enter(entered := job)
            try:
                prepared = (job.prepare or endpoint.prepare)(job.request)
            except BaseException as exc:
                done.append((job, as_error(exc, self.name)))
                continue
            job.times.append(time.perf_counter())
            if isinstance(prepared, Reply):
                done.append((job, prepared))
            else:
                feeds.append((job, prepared))
        self._prepared(claimed)
        if feeds:
            outcomes = batcher.submit(feeds)
            if outcomes is not None:
                self.finish_all(outcomes, done, entered)

    def finish_all(self, outcomes: list[tuple[Job, Any]], done: Done, entered: Job | None = None) -> None:
        """The last stage of each job the model ran; ``entered``: the job whose context this thread is in already."""
        for job, output in outcomes:
            if isinstance(output, BaseException):
                done.append((job, as_error(output, self.name)))
                continue
            if job is not entered:
                self._enter(entered := job)
            job.times.append(time.perf_counter())
            try:
                done.append((job, (job.finish or self.endpoint.finish)(job.request, output)))
                job.times.append(time.perf_counter())
            except BaseException as exc:
                done.append((job, as_error(exc, self.name)))

    def _enter(self, job: Job) -> None:
        request_id_var.set(job.request.request_id)  # api_var is set once per thread (_work)
        if job.span is not None:  # with tracing on, every job has one
            enter_span(job.span)

    def deliver(self, outcomes: list[tuple[Job, Any]]) -> None:
        """Called on the batcher's thread: the last stage goes back to the API's threads."""
        self._queue.put(Outputs(outcomes))


__all__ = ["Hooks", "Pipeline"]
