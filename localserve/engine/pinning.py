"""Pinning a replica's request threads to one core: the event loop and the API threads it hands requests to.

A request crosses from the loop to an API's thread and back; on one core each crossing is a direct switch instead of a
wake-up on another core, and the two threads do not pass the GIL between cores. Two more things make the crossings
cheap:

- The pinned threads are scheduled ``SCHED_BATCH``: a woken thread of that policy does not preempt the thread running on
  its core. Each side wakes the other while it still holds the GIL; with preemption, each wake-up switched to a thread
  that only blocked on the GIL, and back.
- The threads the runtimes made while loading (onnxruntime's intra-op pool, which spins between calls) move to the other
  cores: a woken ``SCHED_BATCH`` thread waits for a busy thread on its core to use up its time slice.

The threads stay as they are where the platform has no such calls (``sched_setaffinity`` is Linux's). The figures:
benchmarks/README.md, "Handing requests over without preemption".
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
