"""CPU time per request by stage, on the thread that ran it: timers put around a running server's stages.

Used by hotpath.py. Each stage is timed with ``time.thread_time_ns`` on entry and exit (about 1 us of
its own per stage, counted in the stage); a thread's ``other`` is its whole CPU time less its timed
stages: waiting for work, waking up, the queue, the answer's write, the records.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

DIAG = __import__("os").environ.get("HOTPATH_GC_DIAG") == "1"

# (thread name, stage) -> CPU nanoseconds; each key is written by one thread only.
SPENT: dict[tuple[str, str], int] = {}

ORDER = ["decode", "pre_inference", "coerce", "model", "post_inference", "encode"]


def _timed(stage: str, func: Callable[..., Any]) -> Callable[..., Any]:
    clock = time.thread_time_ns
    current = threading.current_thread

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return func(*args, **kwargs)
        finally:
            key = (current().name, stage)
            SPENT[key] = SPENT.get(key, 0) + clock() - start

    return wrapper


def instrument(app: Any) -> list[str]:
    """Put the timers around every API's stages; returns the stages it found (older checkouts lack some)."""
    import localserve.handlers.request_handler as rh

    found = []
    for module_attr, stage in (("decode_payload", "decode"), ("cortex_reply", "encode")):
        if hasattr(rh, module_attr):
            setattr(rh, module_attr, _timed(stage, getattr(rh, module_attr)))
            found.append(stage)
    for rt in app.apis.values():
        endpoint = rt.pipeline.endpoint
        for attr, stage in (("pre", "pre_inference"), ("post", "post_inference")):
            if getattr(endpoint, attr, None) is not None:
                setattr(endpoint, attr, _timed(stage, getattr(endpoint, attr)))
                found.append(stage)
        _timeline(endpoint)
        model = getattr(endpoint, "model", None)
        for attr, stage in (("coerce", "coerce"), ("run", "model")):
            if model is not None and hasattr(model, attr):
                setattr(model, attr, _timed(stage, getattr(model, attr)))
                found.append(stage)
    return [s for s in ORDER if s in found]


# Wall time of each request on its worker, from its prepare to the end of its finish (the model between).
TIMELINE: list[float] = []
_began = threading.local()


def _timeline(endpoint: Any) -> None:
    prepare, finish, clock = endpoint.prepare, endpoint.finish, time.perf_counter

    def timed_prepare(*args: Any, **kwargs: Any) -> Any:
        _began.at = clock()
        return prepare(*args, **kwargs)

    def timed_finish(*args: Any, **kwargs: Any) -> Any:
        try:
            return finish(*args, **kwargs)
        finally:
            TIMELINE.append(clock() - _began.at)

    endpoint.prepare, endpoint.finish = timed_prepare, timed_finish


def timeline_line(start: int) -> str:
    """Percentiles of the requests' worker wall times since TIMELINE[start]."""
    times = sorted(TIMELINE[start:])
    if not times:
        return "  worker wall time a request: none recorded"

    def pct(p: float) -> float:
        return 1e6 * times[min(len(times) - 1, int(p / 100 * len(times)))]

    parts = ", ".join(f"p{p:g} {pct(p):,.0f}" for p in (50, 90, 99, 99.9))
    return f"  worker wall time a request (prepare to answer made, us): {parts}, max {1e6 * times[-1]:,.0f}"


def snapshot() -> dict[tuple[str, str], int]:
    return dict(SPENT)


def report(before: dict, after: dict, totals: dict[str, tuple[str, float]], requests: int) -> list[str]:
    """Lines: each thread's stages and its other work, in us per request.

    ``totals``: display name -> (thread name, CPU seconds of the thread over the run)."""
    lines = [f"  {'thread':<18}{'stage':<16}{'us/request':>11}"]
    for shown, (thread, seconds) in totals.items():
        spent = {
            stage: (after.get((thread, stage), 0) - before.get((thread, stage), 0)) / 1e3 / requests for stage in ORDER
        }
        spent = {stage: us for stage, us in spent.items() if us > 0}
        total = 1e6 * seconds / requests
        for stage, us in spent.items():
            lines.append(f"  {shown:<18}{stage:<16}{us:>11.1f}")
        if spent:
            lines.append(f"  {shown:<18}{'other':<16}{total - sum(spent.values()):>11.1f}")
        lines.append(f"  {shown:<18}{'(all)':<16}{total:>11.1f}")
    return lines


class GcWatch:
    """The collector's runs by generation while the load runs: how many, and their pauses (wall time)."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._start = 0.0
        self.on = False

    def __call__(self, phase: str, info: dict) -> None:
        if not self.on:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses[info["generation"]].append(time.perf_counter() - self._start)
            if DIAG and len(self.pauses[0]) % 50 == 5:  # what the collector found unreachable (DEBUG_SAVEALL)
                import collections
                import gc

                kinds = collections.Counter(type(o).__name__ for o in gc.garbage)
                print("garbage:", sum(kinds.values()), kinds.most_common(14), flush=True)
            if DIAG:
                __import__("gc").garbage.clear()

    def lines(self, requests: int) -> list[str]:
        out = []
        for gen, pauses in self.pauses.items():
            if pauses:
                pauses.sort()
                out.append(
                    f"  gc gen {gen}: {len(pauses)} runs (1 per {requests / len(pauses):,.0f} requests), "
                    f"median {1e6 * pauses[len(pauses) // 2]:,.0f} us, max {1e6 * pauses[-1]:,.0f} us"
                )
            else:
                out.append(f"  gc gen {gen}: no runs")
        return out
