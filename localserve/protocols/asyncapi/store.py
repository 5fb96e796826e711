"""Choosing an AsyncAPI's job store by its URL: SQLite (the default, under the cache folder) or Redis.

The records and what every store does are in ``jobs`` (re-exported here); the stores in ``sqlite``
and ``redisstore`` (which imports the redis client only when one is opened).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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

    Machines share the store, so the prefix holds no local path: the project's name (``folder``: the
    URL's ``project`` parameter, else the project folder's name) and the API.
    """
    return f"localserve:{folder or 'root'}:{api}"


PROJECT_PARAMETER = "project"  # redis://HOST:PORT/DB?project=NAME: the project's name in the keys
_PROJECT_NAME = re.compile(r"[A-Za-z0-9._-]+")


def redis_project(url: str, folder: str) -> tuple[str, str]:
    """``url`` without its ``project`` query parameter, and the project's name in the store's keys: that
    parameter, else ``folder``. In a cluster every pod's project is /mnt/project, so ``export kubernetes``
    names the project in the URL and two projects sharing one Redis keep their queues apart."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    names = [value for key, value in query if key == PROJECT_PARAMETER]
    if not names:
        return url, folder
    if not _PROJECT_NAME.fullmatch(names[-1]):
        raise StoreError(
            f"Invalid {PROJECT_PARAMETER}={names[-1]!r} in the job store URL; expected letters, digits, '.', '_' "
            "or '-' (the project's name in the store's keys)."
        )
    rest = urlencode([(key, value) for key, value in query if key != PROJECT_PARAMETER])
    return urlunsplit(parts._replace(query=rest)), names[-1]


def with_project(url: str, name: str) -> str:
    """``url`` naming the project ``name`` in its keys (``?project=name``), unless it names one already."""
    parts = urlsplit(url)
    if any(key == PROJECT_PARAMETER for key, _ in parse_qsl(parts.query, keep_blank_values=True)):
        return url
    query = "&".join(filter(None, (parts.query, urlencode({PROJECT_PARAMETER: name}))))
    return urlunsplit(parts._replace(query=query))


def open_store(url: str | None, *, cache: Path, project: Path, api: str) -> JobStore:
    """The store at ``url`` (``sqlite:///path``, ``redis://host:port/db``), or SQLite under the cache folder."""
    if url is None or url == "sqlite://":
        return SqliteStore(default_store_path(cache, project, api))
    scheme = url.partition("://")[0].lower()
    if scheme == "sqlite":
        return SqliteStore.from_url(url)
    if scheme in ("redis", "rediss", "unix"):
        url, name = redis_project(url, project.resolve().name)
        store: JobStore = RedisStore.from_url(url, namespace=redis_namespace(name, api))
        return store
    raise StoreError(
        f"Unknown job store {url!r}; expected sqlite:///PATH (the default, under the cache folder) "
        "or redis://HOST:PORT/DB."
    )
