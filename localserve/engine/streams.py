"""Streamed responses: a generator's chunks, made and sent from the API's thread that ran the handler.

The thread stays with the stream until its last chunk, so no other request's user code runs between two chunks (one
request at a time: Cortex 0.10-0.11 docs, *Request handlers*). Each chunk waits until the event loop has handed it to
the client (backpressure). A client that leaves closes the generator (its ``finally`` runs); a generator that raises
ends the response without its last chunk, so the client sees it cut short. The request is recorded with how the stream
ended (``pump``'s outcome): 499 for a client that left, 500 for a generator that raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any

from localserve.engine.job import Job
from localserve.messages.response import Reply

log = logging.getLogger("localserve")

POLL = 1.0  # seconds between checks that the event loop still runs, while a chunk is being sent


class StreamEnded(Exception):
    """The client went away, or the server stopped, while a stream was being sent."""


def open_stream(job: Job) -> None:
    """Before the job's future is resolved with a streamed Reply: what both sides use to talk."""
    job.gone = threading.Event()
    job.stream_done = concurrent.futures.Future()


def pump(job: Job, reply: Reply) -> None:
    """Send ``reply.stream`` chunk by chunk through the job's ``Client``; runs on the API's thread.

    ``job.stream_done`` gets None when the last chunk went out, else the status to record.
    """
    assert reply.stream is not None and job.stream_done is not None
    stream = reply.stream
    outcome: int | None = None
    request_id = job.request.request_id
    headers = [*reply.headers, (b"x-request-id", request_id.encode("latin-1"))]
    try:
        client = job.client
        assert client is not None
        _send(job, client.stream_start(reply.status, headers))
        for chunk in stream:
            _send(job, client.stream_chunk(chunk, True))
        _send(job, client.stream_chunk(b"", False))
    except StreamEnded:
        log.info("request %s: the client went away; the stream was stopped", request_id)
        outcome = 499
    except BaseException:  # sys.exit() or KeyboardInterrupt in the generator too: the thread serves on
        log.exception("request %s: the streamed response failed and was cut short", request_id)
        outcome = 500
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                log.exception("request %s: closing the stream failed", request_id)
        job.stream_done.set_result(outcome)


def _send(job: Job, sending: Coroutine[Any, Any, None]) -> None:
    """Run ``sending`` on the event loop and wait until it is done (backpressure)."""
    assert job.gone is not None
    if job.gone.is_set():
        sending.close()
        raise StreamEnded
    future = asyncio.run_coroutine_threadsafe(sending, job.loop)
    while True:
        try:
            future.result(POLL)
            return
        except concurrent.futures.TimeoutError:
            if job.loop.is_closed() or job.gone.is_set():
                future.cancel()
                raise StreamEnded from None
        except (concurrent.futures.CancelledError, OSError, RuntimeError) as exc:
            raise StreamEnded from exc
