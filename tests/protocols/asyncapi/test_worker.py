"""The AsyncAPI worker on a broken store: it says so once, not at every try."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from localserve.protocols.asyncapi.sqlite import SqliteStore


def test_a_worker_on_a_broken_store_says_so_once_not_every_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from localserve.protocols.asyncapi.worker import AsyncWorker

    path = tmp_path / "jobs.sqlite3"
    real_store = SqliteStore(path)
    (path.parent / "moved.sqlite3").write_bytes(b"")
    os.replace(path.parent / "moved.sqlite3", path)  # another file where the store's was: broken at its next use
    tries = threading.Semaphore(0)

    class Counted:  # the real store, each use of it counted
        def __getattr__(self, name: str) -> object:
            method = getattr(real_store, name)

            def counted(*args: object, **kwargs: object) -> object:
                tries.release()
                return method(*args, **kwargs)

            return counted

    worker = AsyncWorker("jobs", Counted(), lambda job: None, slots=1, retention=60.0, ready=lambda: True)  # type: ignore[arg-type]
    worker.start()
    try:
        for _ in range(3):  # three uses, each refused (the worker tries again a second later)
            assert tries.acquire(timeout=60)
    finally:
        worker.stop()
        real_store.close()
    assert caplog.text.count("its file was replaced by another file") == 2  # the store's own line, the worker's once
