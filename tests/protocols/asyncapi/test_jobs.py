"""What every store shares: the worker ids of this machine and whether their process is gone, RFC 3339 times.

A worker of another process is a child Python that printed its id and ended."""

from __future__ import annotations

import subprocess
import sys

from localserve.protocols.asyncapi.jobs import rfc3339, worker_id, worker_is_dead
from tests.protocols.asyncapi.test_store import T0


def test_workers_of_this_machine_are_known_dead_once_their_process_is_gone() -> None:
    me = worker_id()
    assert not worker_is_dead(me)
    child = subprocess.run(
        [sys.executable, "-c", "from localserve.protocols.asyncapi.store import worker_id; print(worker_id())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert worker_is_dead(child.stdout.strip())
    assert not worker_is_dead("another-host:1:1:abcd")  # only its lease can tell


def test_rfc3339_timestamps() -> None:
    assert rfc3339(T0) == "2027-01-15T08:00:00.000Z"
