"""The event loop's side of one API: admission, the deadline, the client leaving, shutdown.

``Engine.submit`` calls ``admit()`` (503 at once when the API is not ready or its queue is full,
before a body is read) and ``run()`` (the request queued on the API's threads; the deadline, the
client leaving and shutdown decided here, as typed errors the door renders). One timer per API
(``_sweep``) watches deadlines and, once a request has waited ``watch_after``, its client; the
right to answer a request is its ``Job``'s (``engine/job.py``, the states' table).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from localserve.engine.job import QUEUED, Job
from localserve.engine.jobqueue import Admission
from localserve.engine.pipeline import Pipeline
from localserve.engine.ports import Client, Hooks, ReplyWriter, Stages
from localserve.engine.traces import enter_span
from localserve.errors import ClientDeadline, ClientGone, LocalServeError, NotReady, Overloaded, ShuttingDown, Timeout
from localserve.logs import request_id_var
from localserve.messages.request import Request
from localserve.messages.response import Reply

if TYPE_CHECKING:
    from localserve.tracing.spans import RequestSpan

log = logging.getLogger("localserve")

# Seconds between two warnings that an API's queue is full: the first 503 is told at once, the rest are counted
CAPACITY_WARNING_EVERY = 60.0  # and told at most this often (each is in the access log too)
_clock = time.monotonic  # the warnings' clock (a test's to set)

WATCH_AFTER = 0.02  # seconds a request waits before a task listens for its client leaving


class Lifecycle:
    """Admits, queues and answers the requests of one API, whatever front door they came through."""

    def __init__(self, pipeline: Pipeline, *, status: Callable[[], tuple[str, str | None]]) -> None:
        self.pipeline = pipeline
        self.name = pipeline.name
        self.timeout = pipeline.api.timeout
        self.status = status  # ("ready" | "loading" | "failed", error)
        self.waiting: dict[Job, None] = {}  # requests waiting for their answer, in admission order
        self.watch_after = min(WATCH_AFTER, self.timeout)
        self.tick = max(0.001, min(WATCH_AFTER, self.timeout / 2))  # how often _sweep looks at them
        self._sweeping: asyncio.AbstractEventLoop | None = None  # the loop whose timer runs _sweep, if any
        self._admission = Admission(pipeline.queue)
        self._idle: asyncio.Future[None] | None = None  # set once no request waits, while ``drained`` waits for it
        self._shed = 0  # 503s of a full queue not yet told in the log; loop only, as is _warn_at
        self._warn_at = 0.0  # the _clock() reading from which the next such 503 is told (0: none told yet)
        self.after_pending = 0  # answers whose after-reply stage (post_predict) has not run yet; loop only

    def admit(self) -> Admission:
        """Admit one request: NotReady or Overloaded (503) at once, else an ``Admission`` to read its body in."""
        state, error = self.status()
        if state != "ready":
            raise NotReady(self.name, error)
        pipeline = self.pipeline
        if pipeline.full():  # answer before reading a large body for nothing
            raise self._overloaded()
        return self._admission

    def _overloaded(self) -> Overloaded:
        """The 503 of a full queue, told in the log at the first and then at most every ``CAPACITY_WARNING_EVERY``."""
        self._shed += 1
        now = _clock()
        if now >= self._warn_at:
            if self._warn_at == 0.0:
                log.warning(
                    "api %r is at capacity: %d requests are queued in this replica (max_queue), so new ones are "
                    "answered 503 with Retry-After; raise max_queue, run more replicas (--replicas), or send fewer "
                    "requests at once",
                    self.name,
                    self.pipeline.max_queue,
                )
            else:
                log.warning(
                    "api %r: %d more request(s) answered 503 at capacity (max_queue %d) since the last warning",
                    self.name,
                    self._shed,
                    self.pipeline.max_queue,
                )
            self._shed, self._warn_at = 0, now + CAPACITY_WARNING_EVERY
        return Overloaded(self.name, self.pipeline.max_queue)

    async def run(
        self,
        request: Request,
        client: Client | None = None,
        *,
        stages: Stages | None = None,
        writer: ReplyWriter | None = None,
        deadline: float | None = None,
        span: RequestSpan | None = None,
    ) -> Reply:
        """Queue ``request`` on the API's threads and wait for its Reply; errors are raised, typed.

        ``stages`` replace the endpoint's (see ``Stages``). With a ``writer`` the finishing thread writes the answer
        (the Reply says ``sent``); a stream is sent through ``client`` before this returns, ``status`` saying how it
        ended. A ``deadline`` under the API's timeout is the client's (ClientDeadline). ``span``: told the job's stamps
        and batch.
        """
        if deadline is not None and deadline <= 0:
            raise ClientDeadline(self.name, 0.0)
        loop = asyncio.get_running_loop()
        job = Job(request, loop, stages, span)
        job.client, job.writer = client, writer
        try:
            self.pipeline.submit(job)
        except Overloaded:  # filled while its body was read
            raise self._overloaded() from None
        del request
        waiting = self.waiting
        waiting[job] = None
        if self._sweeping is not loop:  # no sweep yet, or one on a loop that is gone
            loop.call_at(job.started + self.tick, self._sweep)
            self._sweeping = loop
        # The sweep watches the API's timeout; only a client's shorter deadline costs a timer of its own.
        expiry = (
            None
            if deadline is None or deadline >= self.timeout
            else loop.call_at(job.started + deadline, self._expire, job, deadline)
        )
        try:
            reply: Reply = await job.future
            if reply.stream is not None and (ended := await self._follow_stream(job)) is not None:
                reply.status = ended  # sent as 200, recorded as what happened: cut short (500) or left (499)
            if reply.after is not None:  # the caller owes after_reply: this runtime is not drained before it ran
                self.after_pending += 1
        finally:
            del waiting[job]
            self._maybe_idle()
            if expiry is not None:
                expiry.cancel()
            if job.listener is not None:
                job.listener.cancel()
            # Cancelled (the awaiting task was, which cancels the future it awaited): work nobody waits for
            # is never started.
            if not job.future.done() or job.future.cancelled():
                self.pipeline.drop(job)
            # A raised error's traceback holds this frame: without this, frame -> job -> future ->
            # error -> traceback -> frame would keep the request alive until a cyclic collection.
            job = None  # type: ignore[assignment]
        return reply

    def _sweep(self) -> None:
        """Every ``tick`` while requests wait: deadlines, and a listener for a client that waited a while.

        One timer for the API instead of one per request. ``waiting`` is in admission order, so
        the sweep stops at the first request younger than ``WATCH_AFTER``: under load it visits
        only the requests that really wait. A deadline is seen at most one tick late.
        """
        waiting = self.waiting
        loop = asyncio.get_running_loop()
        if loop is not self._sweeping:  # a sweep of a loop that is no longer this API's
            return
        if not waiting:
            self._sweeping = None
            return
        now = loop.time()
        watch_from = now - self.watch_after
        deadline_from = now - self.timeout
        for job in waiting:  # nothing here removes a job: answered requests leave from run()'s finally
            if job.started > watch_from:
                break
            if job.future.done() or job.loop is not loop:
                continue
            if job.started <= deadline_from:
                if not job.claim():  # an API thread is writing its answer; its Reply follows
                    continue
                started = not self.pipeline.drop(job)
                job.future.set_exception(Timeout(self.name, self.timeout, started))
            elif job.state == QUEUED and job.listener is None and job.client is not None:
                job.listener = loop.create_task(self._listen(job, job.client))
        loop.call_at(now + self.tick, self._sweep)

    def _expire(self, job: Job, deadline: float) -> None:
        """The client's own deadline passed: dropped if not started, answered 504 unless a thread is writing it."""
        if not job.future.done() and job.claim():
            self.pipeline.drop(job)
            job.future.set_exception(ClientDeadline(self.name, deadline))

    async def _listen(self, job: Job, client: Client) -> None:
        try:
            await client.left()
        except asyncio.CancelledError:
            # The cancellation's traceback holds this frame, and the job holds this task (``listener``):
            # without this, job -> task -> error -> traceback -> frame -> job would keep the request and
            # its answer alive until a cyclic collection.
            job = None  # type: ignore[assignment]
            raise
        if self.pipeline.drop(job) and not job.future.done():
            job.future.set_exception(ClientGone())

    async def _follow_stream(self, job: Job) -> int | None:
        """Wait while the API's thread sends the stream; tell it when the client goes away. None when the
        stream ended whole, else the status to record."""
        assert job.stream_done is not None and job.gone is not None
        gone = job.gone
        client = job.client

        async def listen() -> None:
            if client is not None:
                await client.left()
                gone.set()

        listener = asyncio.get_running_loop().create_task(listen())
        try:
            return await asyncio.wrap_future(job.stream_done)
        finally:
            listener.cancel()
            gone.set()

    def after_reply(self, reply: Reply, request_id: str, span: RequestSpan | None = None) -> None:
        """The answer of ``request_id`` has been sent (or its client left): queue its after-reply stage
        (``Reply.after``, a predictor's ``post_predict``) on the API's threads, on this runtime, whose ``run`` gave
        the reply. Nobody waits for it; its failure is logged and counted, never sent. Every reply ``run`` gave
        with an ``after`` must come here: until it has run, ``drained`` does not return."""
        after = reply.after
        if after is None:
            return
        reply.after = None
        loop = asyncio.get_running_loop()
        stage = functools.partial(_run_after, self.name, after, request_id, self.pipeline.hooks, span)

        def run_then_count() -> None:
            try:
                stage()
            finally:
                loop.call_soon_threadsafe(self._after_done)

        self.pipeline.call(run_then_count)

    def _after_done(self) -> None:
        self.after_pending -= 1
        self._maybe_idle()

    def _maybe_idle(self) -> None:
        if self._idle is not None and not self.waiting and not self.after_pending and not self._idle.done():
            self._idle.set_result(None)  # a replaced runtime (serve --reload) has answered its last request

    async def drained(self) -> None:
        """Return once nothing waits here and every after-reply stage has run (a runtime replaced by --reload)."""
        if self.waiting or self.after_pending:
            self._idle = asyncio.get_running_loop().create_future()
            await self._idle

    def cancel_waiting(self) -> int:
        """Shutdown: nothing queued starts any more; every waiting client is answered 503. Returns how many."""
        count = 0
        for job in list(self.waiting):
            if job.gone is not None:
                job.gone.set()
            started = not self.pipeline.drop(job)
            if not job.future.done() and job.claim():
                job.future.set_exception(ShuttingDown(started))
                count += 1
        return count


def _run_after(api: str, after: Callable[[], None], request_id: str, hooks: Hooks, span: RequestSpan | None) -> None:
    """On one of the API's threads: an after-reply stage, its failure logged with the request's id and counted."""
    request_id_var.set(request_id)
    enter_span(span)
    try:
        after()
    except LocalServeError as exc:
        details = f"\n{exc.details}" if exc.details else ""
        log.error("request %s to api %r: after the reply: %s%s", request_id, api, exc, details)
    except Exception:  # a bug of ours: logged all the same, the thread serves on
        log.exception("request %s to api %r: after the reply", request_id, api)
    else:
        return
    if hooks.after_failed is not None:
        hooks.after_failed()
