"""The work items of an API's threads when it has several (``engine/handoff.py``): first in, first out, and the
thread woken for an item is the one that went idle last."""

from __future__ import annotations

import queue
import threading

import pytest

from localserve.engine.handoff import LastIdleFirst
from tests.conftest import wait_until


def waiting(items: LastIdleFirst[str], name: str, got: dict[str, str]) -> threading.Thread:
    """A thread that waits for one item and records it under ``name``, started once it waits."""
    idle = len(items._idle)
    thread = threading.Thread(target=lambda: got.__setitem__(name, items.get()), daemon=True)
    thread.start()
    wait_until(lambda: len(items._idle) == idle + 1, f"{name} waiting")
    return thread


def test_items_come_out_in_order_and_none_waits_when_there_are_some() -> None:
    items: LastIdleFirst[int] = LastIdleFirst()
    for n in range(5):
        items.put(n)
    assert items.qsize() == 5
    assert [items.get_nowait(), items.get(), items.get(timeout=0.0)] == [0, 1, 2]
    assert [items.get(block=False), items.get()] == [3, 4]
    with pytest.raises(queue.Empty):
        items.get_nowait()
    with pytest.raises(queue.Empty):
        items.get(block=False)


def test_the_thread_woken_for_an_item_is_the_one_that_went_idle_last() -> None:
    items: LastIdleFirst[str] = LastIdleFirst()
    got: dict[str, str] = {}
    first = waiting(items, "idle longest", got)
    last = waiting(items, "idle last", got)
    items.put("one")
    last.join(30)
    assert got == {"idle last": "one"}  # SimpleQueue would have woken the other
    items.put("two")
    first.join(30)
    assert got == {"idle last": "one", "idle longest": "two"}
    assert items._idle == []


def test_a_wait_that_times_out_raises_empty_and_leaves_no_waiter_behind() -> None:
    items: LastIdleFirst[str] = LastIdleFirst()
    with pytest.raises(queue.Empty):
        items.get(timeout=0.01)
    assert items._idle == []
    items.put("later")
    assert items.get(timeout=0.01) == "later"


def test_a_thread_woken_for_an_item_another_took_waits_only_for_the_time_left(monkeypatch) -> None:
    """A timeout bounds the whole wait: woken for an item that another thread took first, a thread waits again
    for what is left of it, not for the whole timeout again (the list batcher's interval relies on it)."""
    import types

    import localserve.engine.handoff as handoff

    now = [1000.0]
    monkeypatch.setattr(handoff, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    items: LastIdleFirst[str] = LastIdleFirst()
    outcome: list[str] = []

    def wait() -> None:
        try:
            outcome.append(items.get(timeout=3600))
        except queue.Empty:
            outcome.append("empty")

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    wait_until(lambda: len(items._idle) == 1, "the thread waiting")
    with items._mutex:  # a put that wakes it, and another thread taking the item before it looks
        items._items.append("taken by another")
        woken = items._idle.pop()
        now[0] += 3601  # the whole timeout has gone by since it began to wait
        woken.release()
        items._items.popleft()
    thread.join(30)
    assert not thread.is_alive() and outcome == ["empty"]
    assert items._idle == []


def test_every_item_reaches_exactly_one_thread() -> None:
    items: LastIdleFirst[int | None] = LastIdleFirst()
    taken: list[list[int]] = [[] for _ in range(4)]

    def work(mine: list[int]) -> None:
        while (item := items.get()) is not None:
            mine.append(item)

    threads = [threading.Thread(target=work, args=(mine,)) for mine in taken]
    for thread in threads:
        thread.start()
    producers = [
        threading.Thread(target=lambda base=base: [items.put(base + n) for n in range(2_000)]) for base in (0, 10_000)
    ]
    for producer in producers:
        producer.start()
    for producer in producers:
        producer.join()
    for _ in threads:
        items.put(None)
    for thread in threads:
        thread.join(60)
    everything = sorted(n for mine in taken for n in mine)
    assert everything == [*range(2_000), *range(10_000, 12_000)]


def test_an_api_with_several_threads_keeps_one_busy_at_concurrency_1(serve, make_project) -> None:
    project = make_project(
        {
            "main.py": "import threading\n\ndef handler(request, context):\n    return {'content': str(threading.get_ident())}\n"
        }
    )
    with serve(project, handler="main:handler", threads_per_process=3) as client:
        items = next(iter(client.app.engine.apis.values())).pipeline.queue.items
        answered_by = set()
        for _ in range(30):
            # The next request once every thread is idle again: the answer leaves before its thread is back
            # waiting, and a request sent in between goes to a thread that was (the one idle last of them).
            wait_until(lambda: len(items._idle) == 3, "the three threads idle")
            answered_by.add(client.post("/").text)
    assert len(answered_by) == 1  # one after the other, each on the thread that answered the last


def test_waits_that_time_out_while_items_arrive_lose_none_and_take_none_twice() -> None:
    """Consumers that give up after a moment and look again (``lists._gather`` waits so): every item is taken
    once, including those put just as a wait timed out."""
    items: LastIdleFirst[int] = LastIdleFirst()
    taken: list[list[int]] = [[] for _ in range(3)]
    done = threading.Event()

    def work(mine: list[int]) -> None:
        while not (done.is_set() and items.qsize() == 0):
            try:
                mine.append(items.get(timeout=0.0005))
            except queue.Empty:
                pass

    threads = [threading.Thread(target=work, args=(mine,)) for mine in taken]
    for thread in threads:
        thread.start()
    for n in range(3_000):
        items.put(n)
    done.set()
    for thread in threads:
        thread.join(60)
    assert sorted(n for mine in taken for n in mine) == list(range(3_000))
    assert items._idle == []
