"""Answering finished jobs from the API's thread: written by the thread where it can, else settled on the loop.

One wake-up of the event loop answers every job a thread finished (``settle``). A job whose front door gave a
``ReplyWriter`` is written by the thread first, so the client has its answer before the loop wakes up to end the
response; a stream holds the thread until its last chunk (``streams.pump``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from localserve.engine.job import Job, settle
from localserve.engine.streams import open_stream, pump
from localserve.engine.traces import enter_span
from localserve.errors import InternalError, LocalServeError
from localserve.logs import request_id_var
from localserve.messages.response import Reply, answer_headers

log = logging.getLogger("localserve")

Done = list[tuple[Job, Any]]


def answer(done: Done, phases: Callable[[list[float]], None] | None = None) -> None:
    """Answer finished jobs: one wake-up of the loop for all of them; streams then hold this thread.

    ``phases`` (the metrics') gets the ``Job.times`` of every job answered 2xx.
    """
    if not done:
        return
    if phases is not None:
        for job, reply in done:
            if type(reply) is Reply and 200 <= reply.status < 300:
                phases(job.times)
    _write_from_thread(done)
    streams = [(job, reply) for job, reply in done if isinstance(reply, Reply) and reply.stream is not None]
    for job, _ in streams:
        open_stream(job)
    try:
        done[0][0].loop.call_soon_threadsafe(settle, done)
    except RuntimeError:  # the loop is closed: the server is gone
        return
    for job, reply in streams:
        request_id_var.set(job.request.request_id)
        if job.span is not None:
            enter_span(job.span)
        pump(job, reply)


def _write_from_thread(done: Done) -> None:
    """Write each whole answer whose front door gave a ``ReplyWriter``, unless the loop answered it already."""
    for job, reply in done:
        writer = job.writer
        if writer is not None and type(reply) is Reply and reply.stream is None and reply.asgi is None:
            if not job.claim():
                continue  # answered by the loop already (its deadline, shutdown)
            headers = answer_headers(reply, job.request.request_id)
            reply.sent = writer.write(reply.status, headers, reply.body)


def answer_quietly(done: Done) -> None:
    """Settle ``done`` on the loop, if it still runs (after an internal error)."""
    if done:
        try:
            done[0][0].loop.call_soon_threadsafe(settle, done)
        except RuntimeError:
            pass


def as_error(exc: BaseException, api: str) -> BaseException:
    """The exception to answer with, its traceback dropped (it would keep the request alive)."""
    if isinstance(exc, LocalServeError):
        exc.__context__ = exc.__cause__ = None  # chained exceptions' frames would keep the request alive
        return exc.with_traceback(None)
    # A bug of ours (or sys.exit in user code): never leave a client hanging.
    log.error("internal error while serving api %r", api, exc_info=exc)
    return InternalError(exc)
