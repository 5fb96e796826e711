"""The work items of an API's threads when it has several: first in, first out, and the thread woken for an item is the
one that went idle last.

``queue.SimpleQueue`` wakes the thread idle longest, so one client's requests went round every thread, each starting on
a core whose caches had gone cold (or that slept deeper) and crossing to it. Woken last-idle-first, a light load stays
on the threads that just worked, and a heavier one still finds every thread.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Generic, TypeVar

T = TypeVar("T")


class LastIdleFirst(Generic[T]):
    """``queue.SimpleQueue``'s methods that the pipeline uses, waking the most recently idle thread."""

    def __init__(self) -> None:
        self._items: collections.deque[T] = collections.deque()
        # Each waiting thread's lock, held until a put releases it; the last one went idle last.
        self._idle: list[threading.Lock] = []
        self._mutex = threading.Lock()

    def put(self, item: T) -> None:
        with self._mutex:
            self._items.append(item)
            if self._idle:
                self._idle.pop().release()

    def get_nowait(self) -> T:
        with self._mutex:
            if self._items:
                return self._items.popleft()
        raise queue.Empty

    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """The oldest item, waiting for one (at most ``timeout`` seconds in all: then ``queue.Empty``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._mutex:
                if self._items:
                    return self._items.popleft()
                if not block:
                    raise queue.Empty
                waiter = threading.Lock()
                waiter.acquire()
                self._idle.append(waiter)
            if waiter.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
                continue  # woken by a put; another thread may have taken the item first: look again, in the time left
            with self._mutex:
                if waiter in self._idle:  # timed out unwoken
                    self._idle.remove(waiter)
                    raise queue.Empty
            waiter.acquire()  # a put woke it just as it timed out: take the item it was woken for, if still there
            block = False

    def qsize(self) -> int:
        return len(self._items)
