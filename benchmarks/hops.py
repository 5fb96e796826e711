"""What one cross-thread wake-up costs on this machine: the engine's hops, alone.

    python benchmarks/hops.py

Prints the p50 and p99 of three round trips (3,000 or 1,000 of each, never asserted):
- a thread ping-pong over ``queue.SimpleQueue``, back to back (both threads stay warm);
- the same after 2 ms idle before each round (both threads sleep, as between requests at c=1);
- event loop -> thread -> ``call_soon_threadsafe`` back, after 2 ms idle: a request's two hops
  (to its API's thread and back to the loop), on asyncio and, where installed, uvloop.

A VM that makes a sleeping vCPU's wake-up expensive shows it here first (benchmarks/README.md,
"on an H100").
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable

IDLE = 0.002  # seconds between rounds: the gap between requests at concurrency 1


def _quantiles(samples: list[float]) -> tuple[float, float]:
    samples.sort()
    return samples[len(samples) // 2] * 1e6, samples[int(len(samples) * 0.99)] * 1e6


def ping_pong(rounds: int, idle: float) -> tuple[float, float]:
    """Round trips to an echoing thread; ``idle`` seconds of sleep before each."""
    there: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    back: queue.SimpleQueue[int] = queue.SimpleQueue()

    def echo() -> None:
        while (item := there.get()) is not None:
            back.put(item)

    thread = threading.Thread(target=echo)
    thread.start()
    samples = []
    for i in range(rounds):
        if idle:
            time.sleep(idle)
        start = time.perf_counter()
        there.put(i)
        back.get()
        samples.append(time.perf_counter() - start)
    there.put(None)
    thread.join()
    return _quantiles(samples)


async def loop_hop(rounds: int, idle: float) -> tuple[float, float]:
    """Loop -> thread (a queue) -> loop (``call_soon_threadsafe``), as the engine hands a request over and back."""
    loop = asyncio.get_running_loop()
    work: queue.SimpleQueue[asyncio.Future[None] | None] = queue.SimpleQueue()

    def worker() -> None:
        while (future := work.get()) is not None:
            loop.call_soon_threadsafe(future.set_result, None)

    thread = threading.Thread(target=worker)
    thread.start()
    samples = []
    for _ in range(rounds):
        await asyncio.sleep(idle)
        start = time.perf_counter()
        future = loop.create_future()
        work.put(future)
        await future
        samples.append(time.perf_counter() - start)
    work.put(None)
    thread.join()
    return _quantiles(samples)


def main() -> None:
    rows: list[tuple[str, Callable[[], tuple[float, float]]]] = [
        ("thread ping-pong, back to back", lambda: ping_pong(3000, 0.0)),
        (f"thread ping-pong, {IDLE * 1e3:g} ms idle before each", lambda: ping_pong(1000, IDLE)),
        ("loop -> thread -> loop (asyncio)", lambda: asyncio.run(loop_hop(1000, IDLE))),
    ]
    try:
        import uvloop

        rows.append(("loop -> thread -> loop (uvloop)", lambda: uvloop.run(loop_hop(1000, IDLE))))
    except ImportError:
        pass
    for name, measure in rows:
        p50, p99 = measure()
        print(f"{name:<45} p50 {p50:6.0f} us   p99 {p99:6.0f} us", flush=True)


if __name__ == "__main__":
    main()
