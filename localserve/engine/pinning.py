"""Pinning a replica's request threads to one core: the event loop and the API threads it hands requests to.

A request crosses from the loop to an API's thread and back; on one core each crossing is a direct
switch instead of a wake-up on another core (measured: a 52 µs round trip became 22 µs), and the two
threads do not pass the GIL between cores. Two more things make the crossings cheap:

- The pinned threads are scheduled ``SCHED_BATCH``: a woken thread of that policy does not preempt the
  thread running on its core. The loop wakes an API's thread while it still holds the GIL (it goes
  on to finish its turn), and the API's thread wakes the loop while it does (it goes on to take its
  next job): with preemption, each wake-up switched to a thread that only blocked on the GIL and
  switched back. Serving an MLP at concurrency 1 on 2 cores, the loop and the API's thread made 4.2
  and 4.1 context switches a request; as ``SCHED_BATCH``, 2.0 and 2.0 (``/proc/PID/task/*/status``).
- The threads the runtimes made while loading (onnxruntime's intra-op pool, which spins between calls)
  move to the other cores. A woken ``SCHED_BATCH`` thread waits for a busy thread on its core to use up
  its time slice, and a pool spinning there would have made every crossing wait for it.

Measured together (``benchmarks/README.md``, "fourteenth pass"; run.py on 2 cores, medians of five
alternated rounds): iris at concurrency 1 / 8 / 64 +1% / +5% / +10%, the mlp +4% / +12% / +2%, batched
iris +3% / +11% / -7%, batched mlp +3% / +6% / +1%; the mlp's concurrency 1 steady across server starts
(3,297-3,384 req/s, against 2,525-3,278).

The threads stay as they are where the platform has no such calls (``sched_setaffinity`` is Linux's).
"""

from __future__ import annotations

import os
import threading


def thread_ids() -> set[int]:
    """The ids of this process's threads (Linux's ``/proc/self/task``); empty where there is no such list."""
    try:
        return {int(tid) for tid in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def pin_this_thread(cpus: set[int]) -> None:
    """This thread on ``cpus``, scheduled ``SCHED_BATCH`` where the platform has it (see the module's text) and the
    thread has the default policy: one the user gave it (``chrt``) is left alone."""
    os.sched_setaffinity(0, cpus)  # 0: this thread
    batch = getattr(os, "SCHED_BATCH", None)
    if batch is None or os.sched_getscheduler(0) != os.SCHED_OTHER:
        return
    try:
        os.sched_setscheduler(0, batch, os.sched_param(0))
    except OSError:  # a sandbox that refuses it (seccomp): pinned all the same
        pass


def move_away(tids: set[int], cpus: set[int], allowed: list[int]) -> int:
    """Those of threads ``tids`` that Python did not start (a runtime's pool) to the allowed cores other than
    ``cpus``; how many moved (none where there is no other core)."""
    rest = set(allowed) - cpus
    python = {thread.native_id for thread in threading.enumerate()}
    moved = 0
    for tid in sorted(tids - python) if rest else ():
        try:
            os.sched_setaffinity(tid, rest)
        except OSError:  # ended since
            continue
        moved += 1
    return moved
