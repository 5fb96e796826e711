"""One request's path at concurrency 1, in wall time, across the event loop and the API's thread.

Used by ``hotpath.py --timeline``. Probes put around a running server's steps (no change to
localserve) note the time of each step of every request; at concurrency 1 one request is in
flight at a time, so the n-th note of each probe belongs to the n-th request. The report gives
each segment's percentiles in µs:

    A  loop    bytes in -> the job queued (A1-A6 split it: uvicorn's parsing, the app's task, our front door)
    B  both    queued -> the API's thread starts it (the wake-up, the loop going idle, the switch)
    C  thread  the stages (decode, pre_inference, the model, post_inference, encode)
    D  thread  the answer's write (headers, the system call)
    E  both    written -> the loop settles it; F loop: settled -> counted (metrics, access log)
    G  client  written -> the next request's bytes in: the client's turn, while the loop does E and F
    H  loop    counted -> the next request's bytes in: what is left of G (negative: E and F were late)

A + B + C + D + G is the round trip; E and F are on it only where H is negative.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

PROBES = ("in", "hdrs", "app", "door", "body", "run", "submit", "start", "fin", "write", "written", "settle", "end")
NOTES: dict[str, list[float]] = {probe: [] for probe in PROBES}
ON = [False]  # set while the measured load runs

SEGMENTS = [
    ("A  loop: bytes in -> job queued", "in", "submit", 0),
    ("A1   uvicorn parses the head (our limits), the task made", "in", "hdrs", 0),
    ("A2   the body parsed; the task starts: App.__call__", "hdrs", "app", 0),
    ("A3   routed to Engine.submit (counted begins)", "app", "door", 0),
    ("A4   admitted, the body read", "door", "body", 0),
    ("A5   the Request made, Lifecycle.run", "body", "run", 0),
    ("A6   the Job made and queued", "run", "submit", 0),
    ("B  handoff: queued -> the thread starts it", "submit", "start", 0),
    ("C  thread: the stages", "start", "fin", 0),
    ("D  thread: finished -> answer written", "fin", "written", 0),
    ("D2   of it, the write (headers, os.write)", "write", "written", 0),
    ("E  wake: written -> settled on the loop", "written", "settle", 0),
    ("F  loop: settled -> counted", "settle", "end", 0),
    ("G  client: written -> next bytes in", "written", "in", 1),
    ("H  loop idle: counted -> next bytes in", "end", "in", 1),
    ("   round trip: bytes in -> next bytes in", "in", "in", 1),
]


def _note(probe: str) -> None:
    if ON[0]:
        NOTES[probe].append(time.perf_counter())


def _before(probe: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _note(probe)
        return func(*args, **kwargs)

    return wrapper


def _after(probe: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        _note(probe)
        return result

    return wrapper


def _after_awaited(probe: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = await func(*args, **kwargs)
        _note(probe)
        return result

    return wrapper


def install() -> None:
    """Put the probes in (before the server starts). Raises AttributeError on a checkout without these steps."""
    import localserve.engine.answers as answers
    import localserve.engine.core as core
    import localserve.engine.jobqueue as jobqueue
    import localserve.engine.lifecycle as lifecycle
    import localserve.protocols.door as door
    import localserve.server.app as app
    import localserve.server.connection.protocol as protocol

    connection = protocol.LimitedHttpProtocol
    received = connection.data_received

    @functools.wraps(received)
    def data_received(self: Any, data: bytes) -> None:
        if self.in_head:  # a request's first bytes (a body that comes in a later read is no new request)
            _note("in")
        received(self, data)

    connection.data_received = data_received  # type: ignore[method-assign]
    connection.on_headers_complete = _after("hdrs", connection.on_headers_complete)  # type: ignore[method-assign]
    called = app.App.__call__

    @functools.wraps(called)
    async def app_call(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            _note("app")
        await called(self, scope, receive, send)

    app.App.__call__ = app_call  # type: ignore[method-assign]
    core.Engine.submit = _before("door", core.Engine.submit)  # type: ignore[method-assign]
    door.read_body = _after_awaited("body", door.read_body)
    lifecycle.Lifecycle.run = _before("run", lifecycle.Lifecycle.run)  # type: ignore[method-assign]
    submit = jobqueue.JobQueue.submit

    @functools.wraps(submit)
    def queued(self: Any, job: Any) -> None:
        submit(self, job)
        if ON[0]:
            NOTES["submit"].append(job.times[0])

    jobqueue.JobQueue.submit = queued  # type: ignore[method-assign]
    write = answers._write_from_thread

    @functools.wraps(write)
    def written(done: Any) -> None:
        began = time.perf_counter()
        write(done)
        if ON[0]:
            end = time.perf_counter()
            for job, _ in done:
                NOTES["start"].append(job.times[1])
                NOTES["fin"].append(job.times[-1])
                NOTES["write"].append(began)
                NOTES["written"].append(end)

    answers._write_from_thread = written
    answers.settle = _before("settle", answers.settle)
    core.Engine._record = _after("end", core.Engine._record)  # type: ignore[method-assign]


def report() -> list[str]:
    """Lines: each segment's p50, p90 and p99 over the requests noted whole, in µs."""
    if NOTES["in"]:  # a request whose bytes came before the probes were on has no "in": its other notes go too
        for probe in PROBES[1:]:
            while NOTES[probe] and NOTES[probe][0] < NOTES["in"][0]:
                NOTES[probe].pop(0)
    counts = {probe: len(notes) for probe, notes in NOTES.items()}
    n = min(counts.values()) - 1  # the last request may be cut off by the end of the load
    out_of_order = sum(
        1
        for i in range(max(n, 0))
        if not NOTES["in"][i] <= NOTES["submit"][i] <= NOTES["start"][i] <= NOTES["written"][i] <= NOTES["settle"][i]
    )
    # One request in flight at a time: the load's end leaves each probe at most two notes past the fewest.
    if n < 10 or max(counts.values()) - min(counts.values()) > 2 or out_of_order > n // 100:
        return [f"  timeline: the probes' notes do not pair up ({out_of_order} out of order; c=1 only): {counts}"]
    lines = [f"  timeline of {n:,} requests at c=1 (wall time, us)       p50       p90       p99"]
    for name, first, second, shift in SEGMENTS:
        spans = sorted(1e6 * (NOTES[second][i + shift] - NOTES[first][i]) for i in range(n))
        p50, p90, p99 = (spans[min(n - 1, int(p * n))] for p in (0.5, 0.9, 0.99))
        lines.append(f"  {name:<58}{p50:>8.1f}  {p90:>8.1f}  {p99:>8.1f}")
    mean_rt = statistics.fmean(NOTES["in"][i + 1] - NOTES["in"][i] for i in range(n))
    lines.append(f"  (mean round trip {1e6 * mean_rt:.1f} us: {1 / mean_rt:,.0f} req/s while noted)")
    return lines
