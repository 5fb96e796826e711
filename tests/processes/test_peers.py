"""``run --api X``: the other APIs of the config, each started on first use only, once, and stopped at the end."""

from __future__ import annotations

import threading
from collections.abc import Callable

from localserve.processes.peers import Peers


def test_a_peer_is_started_once_on_first_use_and_stopped_at_the_end() -> None:
    started: list[str] = []
    stopped: list[str] = []

    def start(name: str) -> tuple[int, Callable[[], list[str]]]:
        started.append(name)
        return 9000 + len(started), lambda: stopped.append(name) or [f"{name}-thread"]

    peers = Peers(["a", "b"], start)
    assert peers.port_of("nope") is None and started == []
    assert peers.port_of("b") == 9001
    assert peers.port_of("b") == 9001
    assert peers.port_of("a") == 9002
    assert started == ["b", "a"]
    assert peers.close() == ["b-thread", "a-thread"] and stopped == ["b", "a"]


def test_callers_at_once_start_one_server() -> None:
    started: list[str] = []
    gate = threading.Barrier(4)

    def start(name: str) -> tuple[int, Callable[[], list[str]]]:
        started.append(name)
        return 9000, list

    peers = Peers(["a"], start)
    ports: list[int | None] = []

    def call() -> None:
        gate.wait()
        ports.append(peers.port_of("a"))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ports == [9000] * 4 and started == ["a"]
