"""The CPU time a request takes on its API's thread: measured over ``count`` requests after ``after``, reported
once, loading and warming up left out."""

from __future__ import annotations

import asyncio

from localserve.engine.cpu import CpuMeter
from localserve.engine.job import Call, Job, Outputs
from localserve.messages.request import Request


def jobs(loop: asyncio.AbstractEventLoop, n: int) -> list[Job]:
    return [Job(Request("POST", [], b""), loop) for _ in range(n)]


def test_the_mean_after_the_first_requests_is_reported_once() -> None:
    async def main() -> tuple[list[float], list[bool]]:
        loop = asyncio.get_running_loop()
        reported: list[float] = []
        meter = CpuMeter(reported.append, after=2, count=4)
        outcomes = [
            meter.sample(jobs(loop, 2), 9.0),  # the first two: warming caches, not measured
            meter.sample([Call(lambda: None)], 5.0),  # a load or a warm-up: not serving
            meter.sample(jobs(loop, 1), 1.0),
            meter.sample([Outputs([])], 0.5),  # model outputs alone: their last stage's CPU counts
            meter.sample(jobs(loop, 3), 2.5),  # four measured: reported
        ]
        return reported, outcomes

    reported, outcomes = asyncio.run(main())
    assert outcomes == [False, False, False, False, True]
    assert reported == [(1.0 + 0.5 + 2.5) / 4]


def test_a_drain_that_began_before_the_measurement_is_not_counted() -> None:
    async def main() -> tuple[list[float], bool]:
        loop = asyncio.get_running_loop()
        reported: list[float] = []
        meter = CpuMeter(reported.append, after=2, count=1)
        first = meter.sample(jobs(loop, 3), 30.0)  # straddles the start: left out
        return reported, first or meter.sample(jobs(loop, 1), 2.0)

    reported, done = asyncio.run(main())
    assert done and reported == [2.0]
