"""Choosing an AsyncAPI's job store by its URL: SQLite (the default, under the cache folder) or Redis.

The records and what every store does are in ``jobs`` (re-exported here); the stores in ``sqlite``
and ``redisstore`` (which imports the redis client only when one is opened).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from localserve.protocols.asyncapi.jobs import (
    JOB_ID_RE,
    LATENCY_BOUNDS,
    STATUSES,
    Counts,
    Job,
    JobState,
    JobStore,
    StoreError,
    latency_bucket,
    new_job_id,
    rfc3339,
    worker_id,
    worker_is_dead,
)
from localserve.protocols.asyncapi.redisstore import RedisStore
from localserve.protocols.asyncapi.sqlite import SqliteStore

__all__ = [
    "JOB_ID_RE",
    "LATENCY_BOUNDS",
    "STATUSES",
    "Counts",
    "Job",
    "JobState",
    "JobStore",
    "StoreError",
    "default_store_path",
    "latency_bucket",
    "new_job_id",
    "open_store",
    "redis_namespace",
    "rfc3339",
    "worker_id",
    "worker_is_dead",
]


def default_store_path(cache: Path, project: Path, api: str) -> Path:
    """``<cache>/async/<project folder>-<hash of its path>/<api>.sqlite3``: one store per project and API."""
    resolved = str(project.resolve())
    key = hashlib.sha256(resolved.encode()).hexdigest()[:12]
    return cache / "async" / f"{project.resolve().name or 'root'}-{key}" / f"{api}.sqlite3"


def redis_namespace(folder: str, api: str) -> str:
    """The prefix of an AsyncAPI's keys in a shared Redis store; its queue is the list ``<prefix>:queue``.

    Machines share the store, so the prefix holds no local path: the project folder's name (``folder``)
    and the API (in a pod, the project is /mnt/project: ``localserve:project:<api>``).
    """
    return f"localserve:{folder or 'root'}:{api}"


def open_store(url: str | None, *, cache: Path, project: Path, api: str) -> JobStore:
    """The store at ``url`` (``sqlite:///path``, ``redis://host:port/db``), or SQLite under the cache folder."""
    if url is None or url == "sqlite://":
        return SqliteStore(default_store_path(cache, project, api))
    scheme = url.partition("://")[0].lower()
    if scheme == "sqlite":
        return SqliteStore.from_url(url)
    if scheme in ("redis", "rediss", "unix"):
        store: JobStore = RedisStore.from_url(url, namespace=redis_namespace(project.resolve().name, api))
        return store
    raise StoreError(
        f"Unknown job store {url!r}; expected sqlite:///PATH (the default, under the cache folder) "
        "or redis://HOST:PORT/DB."
    )
