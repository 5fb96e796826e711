"""List batching: a predictor with ``batching`` gets lists of payloads (``Endpoint.handle_batch``).

Unlike the model batcher (``batcher.py``) nothing is stacked: up to ``max_batch_size`` requests go
to user code as one list, gathered for at most ``batch_interval`` while others are on their way.
"""

from __future__ import annotations

import queue
import time
from typing import Any

from localserve.config import ApiConfig
from localserve.engine.answers import Done, as_error
from localserve.engine.job import Job
from localserve.engine.jobqueue import JobQueue
from localserve.engine.ports import Hooks
from localserve.engine.traces import enter_span
from localserve.handlers import Endpoint
from localserve.logs import request_id_var


class ListBatches:
    """Runs the drained jobs of one API as lists of requests through its endpoint's ``handle_batch``."""

    def __init__(self, api: ApiConfig, endpoint: Endpoint, jobs: JobQueue, hooks: Hooks) -> None:
        assert api.batching is not None
        self.name = api.name
        self.size = api.batching.max_batch_size
        self.interval = api.batching.batch_interval
        self.endpoint = endpoint
        self.jobs = jobs
        self.hooks = hooks

    def run(self, jobs: list[Job], done: Done) -> None:
        """Claim ``jobs``, gather more up to a batch, run them a batch at a time; answers go to ``done``."""
        jobs = self.jobs.claim(jobs)
        self.jobs.prepared(len(jobs))
        if len(jobs) < self.size:
            self._gather(jobs)
        for start in range(0, len(jobs), self.size):
            self._run(jobs[start : start + self.size], done)

    def _gather(self, jobs: list[Job]) -> None:
        """Wait up to ``batch_interval`` for more jobs while others are on their way.

        Without the check a lone request would always wait out the interval: at concurrency 1 the
        batch can never grow. Requests still being read count, so under load the batch does wait.
        """
        waiting = self.jobs
        deadline = time.monotonic() + self.interval
        while len(jobs) < self.size and waiting.reading + waiting.depth > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                item = waiting.items.get(timeout=remaining)
            except queue.Empty:
                return
            if not isinstance(item, Job) or item.prepare is not None:
                # a stop, a call, or a request with its own stages (V2): handled after this batch
                waiting.items.put(item)
                return
            claimed = waiting.claim([item])
            waiting.prepared(len(claimed))
            jobs.extend(claimed)

    def _run(self, jobs: list[Job], done: Done) -> None:
        request_id_var.set(jobs[0].request.request_id)
        if jobs[0].span is not None:
            enter_span(jobs[0].span)
        if self.hooks.batch is not None:
            self.hooks.batch(len(jobs))
        start = time.perf_counter()
        try:
            results: list[Any] = list(self.endpoint.handle_batch([job.request for job in jobs]))
            if len(results) != len(jobs):
                raise RuntimeError(f"{len(results)} results for {len(jobs)} requests")
        except BaseException as exc:
            results = [as_error(exc, self.name)] * len(jobs)
        end = time.perf_counter()
        for job in jobs:  # the whole batch is their prepare phase
            job.times.append(end)
        if self.hooks.batch_run is not None and len(jobs) > 1:
            self.hooks.batch_run(jobs, start, end)
        done.extend(zip(jobs, results, strict=True))
