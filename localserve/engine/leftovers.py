"""Threads that may still run an API's code after they stopped serving, and joining them at shutdown.

A runtime replaced by ``serve --reload`` may still run a request past its timeout, a cancelled reload may still be
loading, and a model version's batcher may still run a batch after the version left memory. No client waits on them, yet
the process must not exit under them: the interpreter's exit unloads the library they run in (onnxruntime aborts, exit
134). Their threads are kept here until they end, and ``join_all`` waits for them with the API's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable


class Leftovers:
    """The threads kept to be joined at shutdown; those that ended are dropped as others come."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def keep(self, threads: Iterable[threading.Thread | None]) -> None:
        with self._lock:
            alive = [thread for thread in self._threads if thread.is_alive()]
            self._threads = alive + [thread for thread in threads if thread is not None]

    def alive(self) -> list[threading.Thread]:
        with self._lock:
            return [thread for thread in self._threads if thread.is_alive()]


def join_all(threads: Iterable[threading.Thread], timeout: float) -> list[str]:
    """Wait up to ``timeout`` seconds in all for ``threads`` to end; the names of those still running."""
    threads = list(threads)
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread.name for thread in threads if thread.is_alive()]
