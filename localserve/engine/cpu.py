"""The CPU time a request takes on its API's thread, measured once (the pinning default, ``Engine``)."""

from __future__ import annotations

from collections.abc import Callable

from localserve.engine.job import Call, Job
from localserve.engine.jobqueue import Item


class CpuMeter:
    """Calls ``report`` once, on the API's thread, with the CPU seconds a request takes on it.

    ``time.thread_time`` over ``count`` requests after the first ``after`` (which warm caches and code paths): it counts
    what runs on the thread, GIL held or not (decoding, an inline model), not the waits.
    """

    __slots__ = ("after", "count", "counted", "cpu", "jobs", "report")

    def __init__(self, report: Callable[[float], None], after: int, count: int) -> None:
        self.report = report
        self.after = after
        self.count = count
        self.cpu = 0.0
        self.jobs = 0  # requests the thread drained since the measurement began
        self.counted = 0  # of which measured

    def sample(self, items: list[Item], cpu: float) -> bool:
        """One drained set of items took ``cpu`` seconds on the thread; True once reported."""
        if any(isinstance(item, Call) for item in items):
            return False  # loading or warming up, not serving
        jobs = sum(isinstance(item, Job) for item in items)
        self.jobs += jobs
        if self.jobs - jobs < self.after:  # this drain began before the measurement
            return False
        self.counted += jobs
        self.cpu += cpu  # a drain of model outputs alone (batching) adds their last stage's CPU
        if self.counted < self.count:
            return False
        self.report(self.cpu / self.counted)
        return True
