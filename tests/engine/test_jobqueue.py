"""The bounded queue of one API: a 503 at once when full, a job started or dropped (never both), the depth
told as it changes, and the threads told to end once what is queued is done."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from localserve.engine.job import DROPPED, RUNNING, Call, Job
from localserve.engine.jobqueue import JobQueue
from localserve.errors import Overloaded, ShuttingDown
from localserve.messages.request import Request


def run(test: Callable[[asyncio.AbstractEventLoop], Any]) -> Any:
    async def main() -> Any:
        return test(asyncio.get_running_loop())

    return asyncio.run(main())


def new_job(loop: asyncio.AbstractEventLoop) -> Job:
    return Job(Request("POST", [], b"body"), loop)


def test_a_full_queue_refuses_the_next_job_at_once_and_tells_each_depth() -> None:
    def test(loop: asyncio.AbstractEventLoop) -> None:
        depths: list[int] = []
        jobs = JobQueue("iris", max_queue=2, on_depth=depths.append)
        first, second = new_job(loop), new_job(loop)
        jobs.submit(first)
        jobs.submit(second)
        assert jobs.full() and depths == [1, 2]
        with pytest.raises(Overloaded) as caught:
            jobs.submit(new_job(loop))
        assert caught.value.status_code == 503
        assert jobs.items.get_nowait() is first and len(first.times) == 1  # queued at: its first phase time

    run(test)


def test_a_dropped_job_is_never_started_and_a_started_one_never_dropped() -> None:
    def test(loop: asyncio.AbstractEventLoop) -> None:
        depths: list[int] = []
        jobs = JobQueue("iris", max_queue=4, on_depth=depths.append)
        waiting, running = new_job(loop), new_job(loop)
        jobs.submit(waiting)
        jobs.submit(running)
        assert jobs.drop(waiting) and waiting.state == DROPPED and waiting.request is None  # its body let go
        assert not jobs.start(waiting)
        assert jobs.start(running) and running.state == RUNNING
        assert not jobs.drop(running)
        assert (jobs.depth, jobs.preparing, jobs.upstream()) == (0, 1, 1)
        jobs.prepared(1)
        assert (jobs.preparing, depths) == (0, [1, 2, 1, 0])

    run(test)


def test_claim_takes_the_jobs_not_dropped_meanwhile() -> None:
    def test(loop: asyncio.AbstractEventLoop) -> None:
        jobs = JobQueue("iris", max_queue=4, on_depth=None)
        batch = [new_job(loop) for _ in range(3)]
        for job in batch:
            jobs.submit(job)
        jobs.drop(batch[1])
        assert jobs.claim(batch) == [batch[0], batch[2]]
        assert (jobs.depth, jobs.preparing) == (0, 2)

    run(test)


def test_closing_tells_each_thread_once_and_refuses_what_comes_after() -> None:
    def test(loop: asyncio.AbstractEventLoop) -> None:
        jobs = JobQueue("iris", max_queue=4, on_depth=None, threads=1)
        call = Call(lambda: None)
        assert jobs.accept(call)
        assert jobs.close(threads=2)
        assert not jobs.close(threads=2)  # told already
        assert [jobs.items.get_nowait() for _ in range(3)] == [call, None, None]
        assert not jobs.accept(Call(lambda: None))
        with pytest.raises(ShuttingDown):
            jobs.submit(new_job(loop))

    run(test)
