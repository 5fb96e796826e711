"""The Redis job store against a real redis-server (skipped where none is installed): an unreachable server is a
StoreError, and the project named in the URL keeps its jobs apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.protocols.asyncapi.store import StoreError, open_store
from tests.protocols.asyncapi.conftest import needs_redis
from tests.protocols.asyncapi.test_store import T0, A


@needs_redis
def test_an_unreachable_redis_store_is_a_store_error(tmp_path: Path) -> None:
    from tests.conftest import free_port

    port = free_port()  # nothing listens there
    store = open_store(f"redis://:secret@127.0.0.1:{port}/0", cache=tmp_path, project=tmp_path, api="jobs")
    with pytest.raises(StoreError) as caught:
        store.ping()
    assert str(caught.value).startswith(f"The job store redis://:***@127.0.0.1:{port}/0 could not be reached: ")
    with pytest.raises(StoreError):
        store.submit(A, b"", {}, T0)


@needs_redis
def test_the_project_named_in_a_redis_url_keeps_its_jobs_apart(tmp_path: Path, redis_url: str) -> None:
    """Pods all serve /mnt/project: ``?project=NAME`` (what export kubernetes writes) names the keys instead,
    so two projects' APIs of one name share a Redis without taking each other's jobs."""
    import redis

    shop = open_store(f"{redis_url}?project=shop", cache=tmp_path, project=Path("/mnt/project"), api="words")
    lab = open_store(f"{redis_url}?project=lab", cache=tmp_path, project=Path("/mnt/project"), api="words")
    shop.submit(A, b"{}", {}, T0)
    assert lab.claim("w1", T0, lease=30) is None
    job = shop.claim("w1", T0, lease=30)
    assert job is not None and job.id == A
    keys = {key.decode() for key in redis.Redis.from_url(redis_url).keys("*")}
    assert keys and all(key.startswith("localserve:shop:words:") for key in keys), keys
    shop.close()
    lab.close()
