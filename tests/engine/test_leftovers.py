"""Threads that may still run an API's code after it stopped serving: kept until they end, joined at shutdown."""

from __future__ import annotations

import threading

from localserve.engine.leftovers import Leftovers, join_all


def test_threads_that_ended_are_dropped_as_others_come() -> None:
    release = threading.Event()
    busy = threading.Thread(target=release.wait, name="busy")
    done = threading.Thread(target=lambda: None, name="done")
    busy.start()
    done.start()
    done.join()
    leftovers = Leftovers()
    leftovers.keep([busy, done, None])
    assert leftovers.alive() == [busy]
    later = threading.Thread(target=release.wait, name="later")
    later.start()
    leftovers.keep([later])
    assert leftovers.alive() == [busy, later]
    release.set()
    busy.join()
    later.join()
    assert leftovers.alive() == []


def test_join_all_names_the_threads_still_running_at_the_deadline() -> None:
    release = threading.Event()
    stuck = threading.Thread(target=release.wait, name="stuck")
    quick = threading.Thread(target=lambda: None, name="quick")
    stuck.start()
    quick.start()
    quick.join()  # ended before the call: join_all(timeout=0) waits for nothing
    try:
        assert join_all([quick, stuck], timeout=0.0) == ["stuck"]
    finally:
        release.set()
        stuck.join()
    assert join_all([quick, stuck], timeout=0.0) == []
