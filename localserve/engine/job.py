"""A Job: one request between its queueing and its answer, shared by the event loop and the API's threads.

Its states, and every transition (h11's way: one table). ``state`` moves under the queue's lock;
the right to answer (``claim``) is taken once, by whichever side gets there first.

=========  ==========================================  ===============================  =========
state      event                                       who (where)                      next
=========  ==========================================  ===============================  =========
QUEUED     a thread begins its first stage             API thread (``JobQueue.start``)  RUNNING
QUEUED     deadline, client gone, shutdown             loop (``JobQueue.drop``)         DROPPED
RUNNING    the answer is written by the thread         API thread (``claim`` in         answered
                                                       ``answers.answer``)
RUNNING    the API's timeout or the client's           loop (``claim`` in ``_sweep``,   answered
           deadline passes, or shutdown                ``_expire``, ``cancel_waiting``) (504/503)
DROPPED    (never started; its request is let go)      -                                -
=========  ==========================================  ===============================  =========

A claim lost is a no-op: a deadline that finds the thread writing leaves the answer to it, and a
thread that finds the deadline answered drops its result. ``Lifecycle.run`` lets the job go
whatever happens (its ``finally``), so nothing of a finished request stays referenced.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from localserve.engine.ports import Client, ReplyWriter, Stages
from localserve.messages.request import Request

QUEUED, RUNNING, DROPPED = 0, 1, 2


class Job:
    """One request of an API: queued, then claimed by one of the API's threads, or dropped.

    ``future`` is resolved on the event loop with a Reply or an exception. ``finish`` turns the model's output into the
    Reply on the API's threads, like every stage of user code; ``prepare``, when set, turns the request into the model's
    feed in place of the endpoint's ``prepare`` (see ``Stages``).
    """

    __slots__ = (
        "claims",
        "client",
        "finish",
        "future",
        "gone",
        "listener",
        "loop",
        "prepare",
        "request",
        "span",
        "started",
        "state",
        "stream_done",
        "times",
        "writer",
    )

    def __init__(
        self, request: Request, loop: asyncio.AbstractEventLoop, stages: Stages | None = None, span: Any = None
    ) -> None:
        self.request = request
        self.loop = loop
        self.prepare: Callable[[Request], Any] | None = None if stages is None else stages.prepare
        self.finish: Callable[[Request, Any], Any] | None = None if stages is None else stages.finish
        self.future: asyncio.Future[Any] = loop.create_future()
        self.state = QUEUED
        self.started = loop.time()
        # The request's client, as its front door sees it: one that waits a while is listened to for leaving.
        self.client: Client | None = None
        self.listener: asyncio.Task[None] | None = None
        self.gone: threading.Event | None = None  # set when the client of a stream went away
        # A stream's end: None when whole, else the status to record (500 raised, 499 client gone).
        self.stream_done: concurrent.futures.Future[int | None] | None = None
        self.writer: ReplyWriter | None = None  # writes the answer from the API's thread, where the transport can
        self.claims = [True]  # one right to answer: the loop (deadline, shutdown) or a thread writing
        # time.perf_counter() as it is queued, started, prepared, has the model's output, is finished (metrics' PHASES).
        self.times: list[float] = []
        self.span = span  # the request's tracing.RequestSpan, with tracing on (its trace ids, its batch)
        if span is not None:
            span.times, span.own_stages = self.times, stages is not None

    def claim(self) -> bool:
        """Take the one right to answer this request; False when it was taken (``list.pop`` is atomic)."""
        try:
            self.claims.pop()
        except IndexError:
            return False
        return True


class Call:
    """A function to run on one of the API's threads (loading user code and models, warming up)."""

    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run(self) -> None:
        """Run the call on this thread and settle its future (nothing when it was cancelled first)."""
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            self.future.set_result(self.fn())
        except BaseException as exc:
            self.future.set_exception(exc)


class Outputs:
    """Model outcomes the batcher hands back to the API's threads for their last stage."""

    __slots__ = ("outcomes",)

    def __init__(self, outcomes: list[tuple[Job, Any]]) -> None:
        self.outcomes = outcomes


def settle(done: list[tuple[Job, Any]]) -> None:
    """Resolve the futures of finished jobs (on the event loop, once per batch of jobs)."""
    for job, result in done:
        future = job.future
        if future.done():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
